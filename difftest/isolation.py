"""Run kernels in a separate, long-lived worker process so that a kernel that crashes
(segfault, CUDA abort) or hangs costs one case, not the campaign.

The worker keeps its adapters (and their compiled kernels) between cases; it is
restarted after a crash or a timeout, and after an error that leaves the CUDA context
unusable (an illegal memory access or device-side assert is sticky: every later call in
that process would fail too, and the campaign would blame the next Problems for it).
Kernels are named by their registry spec, and the worker rebuilds the same inputs from
the Problem (inputs are deterministic). A kernel's exception comes back as a RuntimeError
carrying the worker's message and, in ``error_type``, the original exception's class name.
"""

import multiprocessing as mp
import os
import signal
import sys
import traceback

from .problem import Problem


class KernelCrashed(RuntimeError):
    pass


class KernelTimeout(RuntimeError):
    pass


def _worker_main(conn, env):
    os.environ.update(env)
    import faulthandler

    faulthandler.enable()  # a segfault prints the kernel's stack to stderr before the worker dies
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (interrupt.py)
    from . import adapter as registry
    from .inputs import make_inputs
    from .layouts import lay_out
    from .outputs import Outputs

    adapters = {}
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        spec, problem_json, device, poison, runs = msg
        try:
            kernel = adapters.get(spec) or registry.get(spec)
            adapters[spec] = kernel
            problem = Problem.from_json(problem_json)
            inputs = lay_out(make_inputs(problem, device))  # the Problem's memory layout
            results = []
            for _ in range(runs):
                out = None
                if poison:
                    out = Outputs.poisoned(problem, inputs.q.dtype, device)
                results.append(kernel.run(inputs, out).to("cpu"))
            conn.send(("ok", results))
        except BaseException as e:  # report everything, keep serving
            msg = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}"
            kind = getattr(e, "error_type", None) or type(e).__name__
            if context_broken(e):
                conn.send(("error_fatal", (kind, msg)))
                return  # a fresh process serves the next case
            conn.send(("error", (kind, msg)))


STICKY = ("illegal memory access", "device-side assert", "unspecified launch failure",
          "misaligned address", "illegal instruction", "CUDA error: an illegal")


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
    """One worker process; ``run`` raises KernelCrashed / KernelTimeout."""

    def __init__(self, env: dict | None = None):
        self.env = dict(env or {})
        self.proc = None
        self.conn = None

    def _start(self):
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, self.env), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    def run(self, spec: str, problem: Problem, device: str, poison: bool, runs: int, timeout_s: float):
        msg = (spec, problem.to_json(), device, poison, runs)
        if self.proc is None or not self.proc.is_alive():
            self._start()
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, OSError):  # died between cases: a fresh one
            self.kill()
            self._start()
            self.conn.send(msg)
        if not self.conn.poll(timeout_s):
            self.kill()
            raise KernelTimeout(f"kernel did not return within {timeout_s:g} s (worker killed)")
        try:
            status, payload = self.conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            # the pipe closes a moment before the process is reaped: wait for its exit status
            self.proc.join(10)
            code = self.proc.exitcode
            self.kill()
            raise KernelCrashed(f"kernel process died: {describe_exit(code)}") from None
        if status == "error_fatal":
            self.kill()
            kind, msg = payload
            raise _kernel_error(kind, msg + "\n(the CUDA context is unusable after this error: worker restarted)")
        if status == "error":
            raise _kernel_error(*payload)
        return payload

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
    e.error_type = error_type
    return e


_WORKERS: dict = {}


def shared_worker(key: str = "default") -> Worker:
    w = _WORKERS.get(key)
    if w is None:
        w = _WORKERS[key] = Worker()
    return w


def close_all():
    for w in _WORKERS.values():
        w.close()
    _WORKERS.clear()
