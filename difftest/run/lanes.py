"""Campaigns side by side: ``difftest run --jobs N`` runs N kernels' campaigns at once,
each in a *lane*, a child process forked from the run after its setup.

Why processes, not threads: a campaign's own work (Hypothesis drawing, the references,
the gates, the case log) is mostly Python and holds the GIL, so two campaigns in two
threads of one process ran *slower* than one after another on the 2-core machine
(prototype, results/speed.md section 10); and a campaign keeps per-process state (the
PhaseTimer stack of timing.py, the shared isolation worker, torch's thread count, the
SIGINT/SIGTERM handling of interrupt.py) that a lane gets for free. Why fork: the run has
imported torch, Hypothesis and the adapters by then (seconds of CPU that a spawned lane
would pay again); it is safe because the run is single-threaded at that point and has not
touched CUDA (``fork_hazard`` checks both, and the run falls back to one lane otherwise).

Each lane takes the next kernel from a shared counter (the longest campaigns of the
previous run in ``--out`` first: ``schedule``), runs its campaign exactly as the serial
loop would (same arguments, same seed: a campaign's cases depend on nothing another
campaign does), with its own isolation worker, and sends the CampaignResult back over a
pipe. The parent (``run_lanes``) only waits: it prints each campaign's block as it
finishes, records it in the run state (runs.py: one writer, so ``--resume`` works as
before) and keeps the results in the order the user named the kernels.

Signals: SIGINT from a terminal reaches the lanes too; the parent forwards the signal it
got to every lane (a second one is ignored there, interrupt.py), each lane's campaign
hands back its partial result, and a lane that cannot answer within ``GRACE_S`` is killed.
A lane that dies (the OOM killer, a bug of difftest's own; a crashing *kernel* only costs a
case in its isolation worker) leaves its campaign as an interrupted, partial result built
from its case log, with the reason; the other lanes go on. Lanes die with the parent
(``PR_SET_PDEATHSIG``), so a killed run leaves nothing running into its folder.
"""

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import wait
from typing import Any

from difftest.argcheck import MAX_JOBS
from difftest.errors import UsageError
from difftest.execute import isolation
from difftest.execute.interrupt import SIGNALS, Interrupted, OutputFailed, deferred, interruptible
from difftest.execute.isolation import WATCHDOG, describe_exit
from difftest.run import heap
from difftest.run.folder import latest_records
from difftest.safeio import read_json
from difftest.search.case_log import logged_cases
from difftest.search.failure_store import safe_name
from difftest.vocab import CampaignStatus

GRACE_S = 120.0  # after a signal, how long a lane may take to hand back its partial result
# a lane's priority below the JIT build workers' (nice, added once): see ``yield_to_builds``
CAMPAIGN_NICE = 10
_YIELD = {"armed": False, "done": False}


class JobsError(UsageError):
    """A bad ``--jobs`` value (one line)."""


def parse_jobs(text: str):
    """``--jobs`` value: an integer >= 1, or "auto" (None)."""
    t = str(text).strip().lower()
    if t == "auto":
        return None
    try:
        n = int(t) if len(t) <= 10 else 0
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_JOBS:
        raise JobsError(
            f"--jobs {str(text)[:40]!r} is invalid: allowed an integer in [1, {MAX_JOBS}] (1: one "
            "campaign at a time) or 'auto'"
        )
    return n


def choose(requested, n_kernels: int, cpus: int, isolate: bool, device: str | None) -> tuple[int, str]:
    """(campaigns at once, why), decided before any kernel is loaded. ``requested``: the
    ``--jobs`` value (None: auto). Auto is one lane per campaign up to the usable cores,
    on the CPU; a GPU run (``--device cuda``) and ``--no-isolate`` run one at a time."""
    if requested is not None:
        if requested > 1 and not isolate:
            raise JobsError(
                f"--jobs {requested} needs isolation: with --no-isolate a crashing kernel takes its "
                "campaign's process down; allowed --jobs 1 (or drop --no-isolate)"
            )
        return min(requested, max(1, n_kernels)), "--jobs"
    if not isolate:
        return 1, "--no-isolate"
    if device == "cuda":
        return 1, "--device cuda: campaigns share the GPU, one at a time"
    n = max(1, min(n_kernels, cpus))
    return n, f"auto: {n_kernels} campaigns, {cpus} cores"


def on_gpu(kernels, device: str | None) -> list:
    """Names of the kernels whose campaigns run on CUDA."""
    return [k.name for k in kernels if (device or k.capability.device) == "cuda"]


def _threads() -> int:
    """Threads of this process, less the orphan watchdog (isolation.die_with_parent), which a
    fork cannot hurt: it holds no lock, only sleeps and reads getppid. Every lane runs one, so
    counting it made every lane wait ``settle_s`` and spawn its worker instead of forking it."""
    watchdogs = sum(t.name == WATCHDOG and t.is_alive() for t in threading.enumerate())
    try:
        return len(os.listdir("/proc/self/task")) - watchdogs
    except OSError:
        return threading.active_count() - watchdogs


def preload() -> None:
    """Import, before the lanes fork, what every lane and every lane's kernel worker (forked
    from it) would import on its own: the campaign's modules (Hypothesis, the coverage phase,
    covertable), and torch's symbolic shapes with sympy, which autograd imports at a process's
    first backward with a gradient (the references' and the kernel's: 0.26 s of CPU each
    time, 4 times in the CPU main job). Starts no thread (``fork_hazard`` checks)."""
    # lazy: keeps torch and Hypothesis off --help; preloading is this function's whole point
    import torch.fx.experimental.symbolic_shapes  # noqa: F401

    import difftest.search.campaign  # noqa: F401


def yield_to_builds() -> None:
    """In a lane of a run that prebuilds JIT kernels: lower this process's priority by
    ``CAMPAIGN_NICE``, once. A lane calls it before its first campaign without builds, and a
    lane's prebuild (``RunPlan.prebuild``) right after its build pool has forked, so the
    build workers keep the run's priority and every campaign process runs below them: on 2
    cores the builds are the cold run's longest chain (a campaign cannot start before its
    kernels are built), and campaigns beside them slowed them by a third (3 processes on 2
    cores); now the campaigns get what the builds leave, and the cores stay busy after the
    builds with the campaigns they did not finish. Among the campaigns nothing changes (all
    at the same nice once the builds are done), and no verdict depends on time; a run
    without builds never lowers anything. Elsewhere (the serial run, a lane of a run
    without builds) a no-op."""
    if _YIELD["armed"] and not _YIELD["done"]:
        _YIELD["done"] = True
        try:
            os.nice(CAMPAIGN_NICE)
        except OSError:  # a priority is an optimisation
            pass


def fork_hazard(settle_s: float = 2.0) -> str | None:
    """Why forking the run now would be unsafe (None: safe): a second thread (its locks
    would be copied held), or a CUDA context (not usable in a forked child). A thread that
    was just joined (the prebuild's pool, warm.py) can still be listed for a moment while
    the OS ends it: up to ``settle_s`` is given for that."""
    end = time.monotonic() + settle_s
    while (n := _threads()) > 1 and time.monotonic() < end:
        time.sleep(0.05)
    if n > 1:
        return f"the run has {n} threads"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the run"
    if "fork" not in mp.get_all_start_methods():
        return "this platform cannot fork"
    return None


def schedule(names: list, previous: dict, first=()) -> list:
    """Indices of ``names`` in the order lanes take them: the kernels named in ``first``
    (those with JIT builds to run: their lane builds while the other lanes run campaigns),
    then the longest previous campaign first (``previous``: kernel -> elapsed seconds, from
    the last report in ``--out``), kernels without a previous time first, in the user's
    order. Only the order of work changes."""
    return sorted(
        range(len(names)), key=lambda i: (names[i] not in first, names[i] in previous, -previous.get(names[i], 0.0), i)
    )


def previous_times(out_dir) -> dict:
    """kernel -> seconds its campaign took in the last run published to ``out_dir`` (OUT), less
    the start of its worker (paid by whichever campaign a lane runs first); {} when there is none.
    Read from that run's run.json (``folder.latest_records``), whose records are report.json's
    less the cases: parsing and checking OUT/report.json (8 MB) took 0.1 s of a warm run's serial
    start on 2 cores; OUT/report.json only where there is no readable run.json."""
    records = latest_records(out_dir)
    try:
        if records is None:
            # size- and depth-limited, no link followed: OUT may be planted
            doc = read_json(os.path.join(out_dir, "report.json"), ValueError, "report.json", root=str(out_dir))
            campaigns = doc.get("campaigns", [])
        else:
            campaigns = list(records.values())
        out = {}
        for c in campaigns:
            start = ((c.get("timing") or {}).get("phases_s") or {}).get("worker_start") or 0.0
            out[c["kernel"]] = max(0.0, float(c.get("elapsed_s") or 0.0) - float(start))
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _lane_main(conn, counter, order, run_one, kernels, parent, env, builders=()):
    """One lane: take the next kernel, run its campaign, send the result; until none is left
    or a signal came (then the partial result of the campaign under way). ``builders``: the
    names of the kernels whose campaigns prebuild (``yield_to_builds``)."""
    isolation.die_with_parent(parent)  # the kernel worker's rule: PR_SET_PDEATHSIG and a watchdog
    _YIELD["armed"] = bool(builders)
    isolation._WORKERS.clear()  # the parent's (none is started when lanes run): never ours to use
    os.environ.update(env)
    torch = sys.modules.get("torch")
    if torch is not None and env.get("OMP_NUM_THREADS", "").isdigit():
        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    with interruptible():
        try:
            while True:
                with counter.get_lock():
                    pos = counter.value
                    counter.value += 1
                if pos >= len(order):
                    break
                i = order[pos]
                k = kernels[i]
                # the adapter's own imports (TileLang's) happen here, not in the run: beside the
                # other lanes, once, and the worker forked next inherits them (frozen: heap.py)
                with heap.setup():
                    try:
                        k.available()
                    except Exception:  # noqa: BLE001 -- the campaign meets it again and reports it
                        pass
                if k.name not in builders:  # below the builds, its worker too (forked next)
                    yield_to_builds()
                # the lane's worker: forked at its start (torch is here already), spawned on a restart
                safe = isolation.shared_worker().proc is None and fork_hazard() is None
                isolation.prestart([getattr(k, "spec", None) or k.name], fork_closing=(conn,) if safe else None)
                with held():
                    conn.send(("start", i, None))
                try:
                    r = run_one(k)
                except OutputFailed as e:  # a full disk: lost here, resumable, not a signal the parent got
                    with held():
                        conn.send(("error", i, f"stopped by {e.name}"))
                    break
                except Interrupted as e:
                    with held():
                        conn.send(("interrupted", i, getattr(e, "partial", None)))
                    break
                except Exception as e:  # a bug of difftest's own: this campaign, not the others
                    with held():
                        conn.send(("error", i, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"))
                    break
                with held():
                    conn.send(("done", i, r))
        except Interrupted:  # between campaigns
            pass
        finally:
            isolation.close_all()
    conn.close()


@contextlib.contextmanager
def held():
    """SIGINT/SIGTERM held back (pending, not lost) while a message is sent or read whole."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def run_lanes(kernels: list, jobs: int, run_one, on_result, on_start=None, order=None, env=None, builders=()) -> dict:
    """Run ``run_one(kernel)`` for every kernel, ``jobs`` at once in forked lanes. Calls
    ``on_start(i)`` when a lane starts kernel ``i`` and ``on_result(i, result)`` in this
    process as each finishes. Returns {"interrupted": the Interrupted or None, "lost":
    {i: why} for campaigns whose lane died or failed, "partial": {i: partial result}}.
    ``env``: set in each lane after the fork (OMP_NUM_THREADS: its threads, and its worker's).
    ``builders``: names of the kernels whose campaigns prebuild JIT kernels (``yield_to_builds``).
    Raises Interrupted nowhere: the caller reads it from the return value."""
    ctx = mp.get_context("fork")
    order = list(range(len(kernels))) if order is None else list(order)
    counter = ctx.Value("i", 0)
    lanes = []  # (process, connection)
    running: dict = {}  # connection -> kernel index under way
    out: dict[str, Any] = {"interrupted": None, "lost": {}, "partial": {}}
    me = os.getpid()
    # the lanes fork with the run's objects frozen (run/heap.py): a lane's full collections
    # (Hypothesis' first register_random runs one) and its worker's skip the inherited heap
    heap.before_fork()
    try:
        for _ in range(min(jobs, len(order))):
            parent_end, child_end = ctx.Pipe(duplex=False)
            p = ctx.Process(
                target=_lane_main,
                args=(child_end, counter, order, run_one, kernels, me, env or {}, frozenset(builders)),
                daemon=False,
            )
            p.start()
            child_end.close()
            lanes.append((p, parent_end))
        _serve(lanes, running, out, on_result, on_start, deadline=None)
    except Interrupted as e:
        out["interrupted"] = e
        with deferred():  # the partial results must come back whole
            for p, _ in lanes:
                if p.is_alive():
                    try:
                        os.kill(p.pid, e.signum)  # type: ignore[arg-type]  # started: a pid; a signal's Interrupted
                    except ProcessLookupError:
                        pass

            _serve(lanes, running, out, on_result, on_start, deadline=time.monotonic() + GRACE_S)
    finally:
        for p, c in lanes:
            if p.is_alive():
                p.kill()
            p.join(10)
            c.close()
    for conn, i in running.items():  # a lane that died with a campaign under way
        p = next(p for p, c in lanes if c is conn)

        out["lost"].setdefault(i, f"its campaign process died: {describe_exit(p.exitcode)}")
    return out


def _serve(lanes, running, out, on_result, on_start, deadline) -> None:
    live = {c: p for p, c in lanes if not c.closed}
    while live:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready = wait(list(live), timeout)
        if not ready:  # past the grace period: the lanes left are killed by the caller
            return
        for conn in ready:
            with held():  # a signal now would cut a result in half: it waits for the next loop
                try:
                    kind, i, payload = conn.recv()  # type: ignore[union-attr,call-arg]  # wait() on Connections
                except Exception:  # noqa: BLE001 -- EOF: the lane exited (or died); its campaign is settled below
                    del live[conn]
                    continue
                if kind == "start":
                    running[conn] = i
                    if on_start:
                        on_start(i)
                    continue
                running.pop(conn, None)
                if kind == "done":
                    on_result(i, payload)
                elif kind == "interrupted":
                    if payload is not None:
                        out["partial"][i] = payload
                else:  # "error"
                    out["lost"][i] = payload


def lost_result(kernel, profile: str, run, why: str):
    """The campaign of ``kernel`` whose lane died: its finished cases, read back from its
    case log, as an interrupted partial result naming why (``--resume`` runs the rest)."""
    # lazy: keeps torch off --help
    from difftest.search.campaign import CampaignResult

    log = f"{safe_name(kernel.name)}.cases.jsonl"
    cases = logged_cases(run.dir / log, run.id)
    failed = next((c for c in cases if c.failed), None)  # its reproducer was written when it was found
    return CampaignResult(
        kernel.name,
        profile,
        status=CampaignStatus.FAILED if failed else CampaignStatus.INTERRUPTED,
        reason=why.splitlines()[0] if why else "its campaign process died",
        cases=cases,
        failure=failed,
        first_failure=failed,
        settings={"case_log": log, "run_id": run.id},
    )
