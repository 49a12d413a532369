"""Run kernels in a separate, long-lived worker process so that a kernel that crashes
(segfault, CUDA abort) or hangs costs one case, not the campaign.

The worker keeps its adapters (and their compiled kernels) between cases; it is
restarted after a crash or a timeout, and after an error that leaves the CUDA context
unusable (an illegal memory access or device-side assert is sticky: every later call in
that process would fail too, and the campaign would blame the next Problems for it).
Kernels are named by their registry spec, and the worker rebuilds the same inputs from
the Problem (inputs are deterministic). A kernel's exception comes back as a RuntimeError
carrying the worker's message and, in ``error_type``, the original exception's class name.

A new worker reports "ready" once its imports are done, and ``timeout_s`` starts only
then: a loaded machine's slow interpreter start (tens of seconds for torch) is not a hung
kernel (it waits up to STARTUP_TIMEOUT_S). Each reply carries the worker's phase seconds
(difftest/execute/timing.py: inputs, compile, kernel, determinism reruns, the copy to the CPU);
the parent adds them to its timer and charges the rest of the round trip (pickling, the
pipe) to "transfer". Every run's outputs cross as one buffer (transfer.py: one copy from a
GPU, one shared-memory segment at most), and the parent can have it moved to the device its
gates run on in one copy (``receive(..., device=)``).

Builds have their own bound. A JIT build inside ``kernel.run`` (the adapter marks it
``timing.phase("compile")``: TileLang's cache, TileOPs' TileLang builds) takes tens of
seconds, more on a loaded host, and is not the kernel hanging; nor is an adapter starting a
process of its own (``timing.phase("worker_start")``: TileOPs' worker imports torch,
TileLang and TileOPs, seconds to tens of seconds). The worker tells the parent when a case
enters and leaves its outermost such phase (``timing.UNTIMED``; ``("compile", True|False,
perf_counter())`` before the reply; every other message is unchanged), and ``receive``
charges the time between the two to ``compile_timeout_s`` instead of ``timeout_s``. A case
killed while building raises BuildTimeout (triage: "build timeout"); one killed after its
build finished is a KernelTimeout (a hang) whose message says how long each took.

Nothing the user did not name runs in the worker: a spawned worker starts with a safe import
path (``PYTHONSAFEPATH=1``, as ``python -P``), so a ``multiprocessing.py`` or ``torch.py`` in
the working directory is never imported (the worker finds difftest through the installed
package). And the worker never outlives its parent: on Linux it asks for SIGKILL when the
parent dies (``PR_SET_PDEATHSIG``, when the launcher is the main thread, whose end is the
process's), and a watchdog thread ends it within ``ORPHAN_POLL_S`` once its parent is gone
(a SIGKILLed ``difftest run`` leaves no kernel computing).
"""

import ctypes
import faulthandler
import gc
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING

from difftest.errors import DifftestError, exception_text
from difftest.execute import adapter as registry
from difftest.execute import timing
from difftest.model.problem import Problem
from difftest.safeio import safe_child_path

if TYPE_CHECKING:  # annotations only
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess


class KernelCrashed(DifftestError, RuntimeError):
    pass


class KernelTimeout(DifftestError, RuntimeError):
    pass


class BuildTimeout(DifftestError, RuntimeError):
    """The case's JIT build did not finish within ``compile_timeout_s``: the kernel never ran."""


class _ParentGone(BaseException):
    """The parent's end of the pipe is closed (it was killed, or closed it with a message
    unread, which a socket reports as a reset): no one to report to, so the worker ends
    quietly instead of printing a traceback on the terminal of a run that is over. A
    BaseException, as SystemExit is: raised inside a kernel's build (the "compile" message),
    an ``except Exception`` there does not swallow it."""


def _say(conn, *msg) -> None:
    try:
        conn.send(msg)
    except (EOFError, OSError) as e:
        raise _ParentGone from e


ORPHAN_POLL_S = 0.5  # how often a worker checks that its parent is alive
WATCHDOG = "difftest-orphan-watchdog"  # its thread's name: it only sleeps and reads getppid (no lock to copy held)


def die_with_parent(parent: int, pdeathsig: bool = True) -> None:
    """End this process when ``parent`` dies: SIGKILL from the kernel on Linux
    (``PR_SET_PDEATHSIG``; only when the launching thread is the parent's main thread,
    since the signal follows the thread), and everywhere a daemon thread that polls
    ``os.getppid()`` (a kernel busy in C code that holds the GIL still dies by the signal)."""
    if pdeathsig and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # it died before the line above
        os._exit(1)

    def watch():
        while True:
            time.sleep(ORPHAN_POLL_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name=WATCHDOG, daemon=True).start()


def _worker_main(conn, env, preload=(), inherited=(), parent=None, pdeathsig=False):
    for c in inherited:  # forked (Worker.launch): the launcher's pipe ends are not ours to hold open
        c.close()
    if parent is not None:
        die_with_parent(parent, pdeathsig)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # forked: not the launcher's handler (interrupt.py)
    os.environ.update(env)

    faulthandler.enable()  # a segfault prints the kernel's stack to stderr before the worker dies
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (interrupt.py)
    try:
        _serve(conn, preload)
    except _ParentGone:
        return


def _serve(conn, preload) -> None:
    # lazy: keeps torch off --help
    from difftest.execute.transfer import pack_outputs
    from difftest.model.inputs import lay_out, make_inputs
    from difftest.model.outputs import Outputs

    adapters = {}
    for spec in preload:  # the run's kernels, imported before the first case asks for them
        try:
            adapters[spec] = registry.get(spec)
            # and their libraries (TileLang's import sets PYTHONPATH, TVM_LIBRARY_PATH ...): a
            # worker whose environment differs from the run's, which imports them too, is restarted
            adapters[spec].available()
        except BaseException:  # noqa: BLE001 -- the case that asks for it meets the error again
            pass
    _say(conn, "ready", dict(os.environ))  # its environment, its own imports' changes included
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        spec, problem_json, device, poison, runs = msg
        out_of_memory = False
        timer = timing.PhaseTimer(on_compile=lambda entering: _say(conn, "compile", entering, time.perf_counter()))
        try:
            with timing.collect(timer):
                with timing.phase("worker_start"):  # importing an adapter the first time
                    kernel = adapters.get(spec) or registry.get(spec)
                adapters[spec] = kernel
                problem = Problem.from_json(problem_json)
                with timing.phase("inputs"):
                    inputs = lay_out(make_inputs(problem, device))  # the Problem's memory layout
                results = []
                for i in range(runs):
                    out = None
                    if poison:
                        with timing.phase("inputs"):
                            out = Outputs.poisoned(problem, inputs.q.dtype, device)
                    with timing.phase("kernel" if i == 0 else "determinism"):
                        got = kernel.run(inputs, out)
                        _sync(device)  # the kernel's GPU time, not the copy's
                    results.append(got)
                with timing.phase("transfer"):
                    packed = pack_outputs(results)  # every run's outputs: one buffer, one copy to the host
            _say(conn, "ok", packed, timer.seconds)  # in the try: an output that cannot be pickled is an error
        except _ParentGone:
            raise
        except BaseException as e:  # report everything, keep serving
            msg = f"{exception_text(e)}\n{traceback.format_exc(limit=6)}"
            kind = getattr(e, "error_type", None) or type(e).__name__
            if context_broken(e):
                _say(conn, "error_fatal", (kind, msg), timer.seconds)
                return  # a fresh process serves the next case
            _say(conn, "error", (kind, msg), timer.seconds)
            out_of_memory = kind == "OutOfMemoryError"
        if out_of_memory:  # the case is run once more (judge/device_memory.py): with this worker's cache given back
            release_device_memory()


def release_device_memory() -> None:
    """Return this process's cached device blocks (a worker's after a kernel ran out of memory,
    the campaign's before a case's retry: judge/device_memory.py)."""
    gc.collect()  # a failed case's tensors, held by its traceback until now
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _sync(device) -> None:
    torch = sys.modules.get("torch")
    if torch is not None and str(device).startswith("cuda") and torch.cuda.is_initialized():
        torch.cuda.synchronize()


POLL_MAX_S = 3600.0  # the longest single wait on the pipe (a timeout of 1e7 s once raised OverflowError)
STARTUP_TIMEOUT_S = 600.0  # a worker's imports, before any kernel call
COMPILE_TIMEOUT_S = 1800.0  # a case's JIT builds together (RunConfig.compile_timeout_s)


STICKY = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "CUDA error: an illegal",
)


def context_broken(e: BaseException) -> bool:
    """True when the error leaves this process's CUDA context unusable: its message names
    a sticky CUDA error, or (when CUDA is in use) a synchronize now fails."""
    if any(s in str(e) for s in STICKY):
        return True
    torch = sys.modules.get("torch")  # only if the kernel brought it in
    if torch is None or not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        return False
    except Exception:
        return True


def describe_exit(code: int | None) -> str:
    """A worker's exit status in words: 'killed by signal SIGSEGV (Segmentation fault)',
    'exited with code 3', or that it never reported one."""
    if code is None:
        return "no exit status after 10 s (the process was killed)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        what = signal.strsignal(-code) or ""
        return f"killed by signal {name}" + (f" ({what})" if what else "")
    return f"exited with code {code}" + (" (os._exit or sys.exit in the kernel)" if code else "")


class Worker:
    """One worker process; ``run`` raises KernelCrashed / KernelTimeout / BuildTimeout."""

    def __init__(self, env: dict | None = None):
        self.env = dict(env or {})
        self.proc: "BaseProcess | None" = None
        self.conn: "Connection | None" = None
        self.last_seconds: dict = {}  # the worker's phase seconds of the last reply
        self.ready = False  # the process reported "ready" (launched, it may still be importing)
        self.served = 0  # cases handed to this process since it was launched
        self.launch_env: dict = {}  # os.environ here when the process was launched (it inherited it)
        self.worker_env: dict | None = None  # the process's own environment when it was ready

    def launch(self, preload=(), fork_closing=None):
        """Start the worker process without waiting for it: its imports (torch, and the
        adapters named in ``preload``, registry specs) run beside the caller's own start.
        The first case (``send``) waits for it to be ready.

        ``fork_closing`` (connections): fork instead of spawn, closing those in the worker.
        Only for a caller that has imported what the worker needs, is single-threaded and
        has no CUDA context (a campaign lane at its start, lanes.py): the worker is then ready
        at once instead of importing torch again. Every restart (``_start``) spawns."""
        ctx = mp.get_context("spawn" if fork_closing is None else "fork")
        self.launch_env, self.worker_env = dict(os.environ), None
        parent, child = ctx.Pipe()
        inherited = () if fork_closing is None else (parent, *fork_closing)
        pdeathsig = threading.current_thread() is threading.main_thread()
        self.proc = ctx.Process(
            target=_worker_main, daemon=True, args=(child, self.env, tuple(preload), inherited, os.getpid(), pdeathsig)
        )
        with safe_child_path():  # spawn: the new interpreter does not put the cwd on sys.path
            self.proc.start()
        child.close()
        self.conn = parent
        self.ready = False
        self.served = 0

    def _start(self):
        with timing.phase("worker_start"):
            if self.proc is None or not self.proc.is_alive() or self.ready:
                if self.proc is not None:
                    self.kill()
                self.launch()
            parent = self.conn
            ok = parent.poll(STARTUP_TIMEOUT_S)
            try:
                ready = parent.recv() if ok else None
            except (EOFError, ConnectionResetError, OSError):
                ready = None
            if not ready or ready[0] != "ready":
                self.proc.join(10 if ok else 0)
                code = self.proc.exitcode
                self.kill()
                why = describe_exit(code) if ok else f"not ready within {STARTUP_TIMEOUT_S:g} s"
                raise KernelCrashed(f"kernel process failed to start: {why}")
            self.ready = True
            self.worker_env = ready[1] if len(ready) > 1 and isinstance(ready[1], dict) else None

    def environment_differs(self) -> bool:
        """True when this process's environment changed since the worker was launched in a
        way the worker does not share: a variable set, changed or removed here since then
        that the worker's own imports did not set alike (an adapter module setting its
        library's variables on import does so in both). Its kernel would then run in another
        environment than the caller's (a ``monkeypatch.setenv`` switching the kernel's
        behaviour between two campaigns of one pytest session)."""
        if self.proc is None:
            return False
        now, then = os.environ, self.launch_env
        changed = [k for k in set(now) | set(then) if now.get(k) != then.get(k) and k not in VOLATILE_ENV]
        if not changed:
            return False
        if not self.ready and self.proc.is_alive():
            self._start()  # a prestarted worker still importing: its environment once ready
        seen = then if self.worker_env is None else self.worker_env
        return any(now.get(k) != seen.get(k) for k in changed)

    def run(
        self,
        spec: str,
        problem: Problem,
        device: str,
        poison: bool,
        runs: int,
        timeout_s: float,
        compile_timeout_s: float = COMPILE_TIMEOUT_S,
    ):
        return self.receive(
            self.send(spec, problem, device, poison, runs), timeout_s, compile_timeout_s=compile_timeout_s
        )

    def send(self, spec: str, problem: Problem, device: str, poison: bool, runs: int) -> float:
        """Hand the worker one case (starting a worker if none is alive) and return at once,
        with the send time that ``receive`` takes: the caller may work meanwhile (the
        runner computes the references while the kernel runs, on another core)."""
        msg = (spec, problem.to_json(), device, poison, runs)
        if self.proc is None or not self.proc.is_alive() or not self.ready:
            self._start()
        t0 = time.perf_counter()
        assert self.conn is not None  # _start() made it
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, OSError):  # died between cases: a fresh one
            self.kill()
            self._start()
            t0 = time.perf_counter()
            self.conn.send(msg)
        self.served += 1
        return t0

    def receive(
        self,
        t0: float,
        timeout_s: float,
        waited_from: float | None = None,
        compile_timeout_s: float = COMPILE_TIMEOUT_S,
        device=None,
    ):
        """The reply to the case sent at ``t0``: each run's Outputs (transfer.py; on
        ``device`` when given, else on the CPU). ``timeout_s`` counts from ``t0``, less the
        time the worker reported building (bounded by ``compile_timeout_s`` in all). Raises
        KernelCrashed / KernelTimeout / BuildTimeout / the kernel's error. ``waited_from``:
        when the caller started waiting, having worked since ``t0``; the worker's phase
        seconds are then charged to the caller's timer only for that wait (scaled down; the
        rest ran beside the caller's own phases), so a campaign's phases still add up to its
        wall time."""
        from difftest.execute.transfer import unpack_outputs  # lazy: torch stays off the CLI's start

        timer = timing.current()
        assert self.conn is not None  # send() started the worker
        waited_from = t0 if waited_from is None else waited_from
        built, building = 0.0, None  # seconds of finished builds; when the build under way began
        while True:
            now = time.perf_counter()
            if building is None:
                left = timeout_s - (now - t0 - built)
            else:
                left = compile_timeout_s - (built + now - building)
            if not self.conn.poll(min(max(0.0, left), POLL_MAX_S)):  # what is already there is read, even late
                if left > POLL_MAX_S:  # a long timeout waits in slices: poll() overflows past ~2.1e6 s
                    continue
                self._timed_out(timer, waited_from, timeout_s, compile_timeout_s, t0, built, building)
            try:
                reply = self.conn.recv()
                tag, payload = reply[0], reply[1]
            except (EOFError, ConnectionResetError, OSError):
                # the pipe closes a moment before the process is reaped: wait for its exit status
                assert self.proc is not None  # send() started it with the pipe
                self.proc.join(10)
                code = self.proc.exitcode
                self.kill()
                if timer:
                    timer.add({"kernel": time.perf_counter() - waited_from})
                raise KernelCrashed(f"kernel process died: {describe_exit(code)}") from None
            if tag != "compile":
                break
            # the worker's clock (perf_counter is system-wide on Linux), kept within this wait:
            # the parent may read both messages late, after computing the references
            at = min(max(float(reply[2]), t0, building or t0), time.perf_counter())
            if payload and building is None:
                building = at
            elif not payload and building is not None:
                built, building = built + (at - building), None
        self.last_seconds = worker = reply[2] if len(reply) > 2 else {}
        if timer:
            now = time.perf_counter()
            rt = now - t0
            charged = {**worker, "transfer": max(0.0, rt - sum(worker.values()))}
            scale = min(1.0, (now - waited_from) / rt) if rt > 0 else 1.0
            timer.add({k: v * scale for k, v in charged.items()})
        if tag == "error_fatal":
            self.kill()
            kind, msg = payload
            raise _kernel_error(kind, msg + "\n(the CUDA context is unusable after this error: worker restarted)")
        if tag == "error":
            raise _kernel_error(*payload)
        with timing.phase("transfer"):
            return unpack_outputs(payload, device)

    def _timed_out(self, timer, waited_from, timeout_s, compile_timeout_s, t0, built, building):
        """Kill the worker and raise BuildTimeout (it was building) or KernelTimeout."""
        self.kill()
        now = time.perf_counter()
        building_s = built + (now - building if building is not None else 0.0)
        if timer:
            waited = now - waited_from
            timer.add({"compile": min(building_s, waited), "kernel": max(0.0, waited - building_s)})
        if building is not None:
            raise BuildTimeout(
                f"kernel build did not finish within {compile_timeout_s:g} s (worker killed after "
                f"{building_s:.1f} s of building and {now - t0 - building_s:.1f} s outside builds): "
                "a slow build, not a hung kernel (RunConfig.compile_timeout_s, --compile-timeout)"
            )
        how = f"; its build/setup took {built:.1f} s, then the kernel ran {now - t0 - built:.1f} s" if built else ""
        raise KernelTimeout(f"kernel did not return within {timeout_s:g} s (worker killed{how})")

    def kill(self):
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(5)
        self.proc = None
        self.conn = None

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self.kill()


def _kernel_error(error_type: str, message: str) -> RuntimeError:
    """The worker's error, raised here: a RuntimeError (so a case's reason reads as it always
    did) that names the exception it stands for."""
    e = RuntimeError(message)
    e.error_type = error_type  # type: ignore[attr-defined]  # read back with getattr (runner.py)
    return e


_WORKERS: dict = {}
# changed by the host process between tests, read by no kernel: no reason for a new worker
VOLATILE_ENV = frozenset({"PYTEST_CURRENT_TEST"})


def share_cores() -> int | None:
    """Give this process and its worker half the cores each for torch's intra-op threads
    (``OMP_NUM_THREADS``, inherited by the worker), unless the user set it: the runner
    computes the references while the worker runs the kernel, and two processes of as many
    threads as cores oversubscribe them. Measured on the 2-core machine under load,
    sdpa-cpu-math's 113 cases took 45 s of CPU with 2 threads each and 15 s with 1.
    Returns the thread count set (None: left as the user set it)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 2
    n = max(1, cores // 2)
    os.environ["OMP_NUM_THREADS"] = str(n)
    torch = sys.modules.get("torch")
    if torch is not None:  # already imported (difftest run called in-process): set it directly
        torch.set_num_threads(n)
    return n


def prestart(specs, key: str = "default", fork_closing=None) -> Worker:
    """Launch the shared worker now, importing the adapters ``specs`` (``difftest run``
    calls it first thing, so the worker's imports overlap the parent's own; a campaign
    lane forks it: ``Worker.launch``)."""
    w = shared_worker(key)
    if w.proc is None:
        w.launch(specs, fork_closing=fork_closing)
    return w


def fresh_worker(spec: str, key: str = "default") -> None:
    """End the shared worker's process and launch a new one importing ``spec``: the next case
    runs where no case ran before it (a hunt's check that a wrong result does not depend on
    what the kernel ran earlier in its process). A live process that has run no case yet is
    kept: a hunt ends with a fresh process and the next hunt's check begins with one, and
    each restart is an import of torch (and, on a JIT kernel, a build)."""
    w = shared_worker(key)
    if w.proc is not None and w.proc.is_alive() and w.served == 0:
        return
    w.kill()
    w.launch((spec,))


def shared_worker(key: str = "default") -> Worker:
    """The worker the cases of this process run in; a worker started in another environment
    (``Worker.environment_differs``) is closed and a fresh one started with this one, so a
    campaign never runs against a worker started for another environment."""
    w = _WORKERS.get(key)
    if w is not None and w.environment_differs():
        w.close()
        w = None
    if w is None:
        w = _WORKERS[key] = Worker()
    return w


def close_all():
    for w in _WORKERS.values():
        w.close()
    _WORKERS.clear()
