"""``difftest bench --cases``: a campaign's framework time per case, per phase, for kernels
run alone and side by side (framework time per case, cases per GPU-hour).

For each kernel a campaign runs in a child process exactly as ``difftest run`` runs it (the
kernel in its isolation worker, the profile's sizes, ``--examples`` drawn Problems plus the
edge corpus, no failure store, ``--seed``: the same Problems before and after a change). A
callback after every case reads the campaign's own time split (difftest/execute/timing.py):
per case, the wall time since the previous case and each phase's share of it; framework
time = wall - the kernel's own calls (compile, kernel, determinism reruns), as the split
defines it. ``alone`` runs the kernels' campaigns one after another, ``side`` all at once
(each with its share of the cores: ``OMP_NUM_THREADS`` = cores / (2 x campaigns), halved with
its worker as ``difftest run --jobs`` does); ``both`` does both.

Printed per kernel and mode: cases, wall seconds, cases per hour, framework ms per case (mean
and the median case), the kernel's share, and each phase's ms per case; with
``--count-ops``, a second, untimed pass of the same campaign counts the ATen operations this
process dispatched per case and phase (on a GPU about one launch each; the worker's are not
seen) and the host reads among them (``.tolist()``, ``.item()``, ``bool()``, ``.cpu()`` ... and
boolean-mask indexing: each a device synchronisation on a GPU). ``--before DIR`` runs the same
campaigns with another checkout (``git archive REV | tar -x -C DIR``): alone, each right before
ours; side by side, all of its campaigns before all of ours: both columns from one machine in
one call. The children run ``_CASE_TIMER``, which needs only
``run_campaign(on_case=)``, ``RunConfig`` and ``timing.current()``: an older checkout runs it
unchanged.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

MODES = ("alone", "side", "both")
KERNEL_PHASES = ("compile", "kernel", "determinism")

_CASE_TIMER = """
import json, sys, time
a = json.loads(sys.stdin.read())
from difftest.execute import timing
from difftest.judge.runner import RunConfig
from difftest.search.campaign import run_campaign

rows, last = [], {}
def on_case(case):
    t = timing.current()
    now = time.perf_counter()
    phases = dict(t.seconds) if t is not None else {}
    prev = last.get("phases", {})
    delta = {k: v - prev.get(k, 0.0) for k, v in phases.items() if v - prev.get(k, 0.0) > 0}
    rows.append({"wall": now - last.get("at", t0), "phases": delta, "status": str(case.status),
                 "size": case.problem.size(), "failed_gates": case.failed_gates})
    last.update(at=now, phases=phases)

def campaign():
    return run_campaign(a["kernel"], a["profile"], max_examples=a["examples"], time_budget=a["time_budget"],
                        database=None, seed=a["seed"], config=RunConfig(isolate=a["isolate"], device=a["device"]),
                        on_case=on_case, hunt=False)

w0 = time.perf_counter()
if a["isolate"]:  # the worker's start (spawn, imports, CUDA) is timed apart: a long campaign pays it once
    from difftest.execute import isolation
    isolation.prestart([a["kernel"]])
    isolation.shared_worker()._start()
t0 = time.perf_counter()
r = campaign()
out = {"kernel": a["kernel"], "cases": len(r.cases), "wall_s": r.elapsed, "timing": r.timing, "rows": rows,
       "status": str(r.status), "failed_cases": sum(c.failed for c in r.cases), "worker_ready_s": t0 - w0}
if a["count_ops"]:
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__", "cpu", "numpy")
    ops, reads = {}, {}
    def phase():
        t = timing.current()
        return t._stack[-1] if t is not None and t._stack else "search"
    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ph = phase()
            ops[ph] = ops.get(ph, 0) + 1
            if func.__name__.split(".")[0] == "nonzero":  # a boolean mask's count, read by torch itself
                reads[ph] = reads.get(ph, 0) + 1
            return func(*args, **(kwargs or {}))
    class Reads(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in READS:
                ph = phase()
                reads[ph] = reads.get(ph, 0) + 1
            return func(*args, **(kwargs or {}))
    rows.clear(); last.clear()
    t0 = time.perf_counter()
    with Reads(), Count():
        r2 = campaign()
    n = max(1, len(r2.cases))
    out["ops_per_case"] = {k: v / n for k, v in ops.items()}
    out["reads_per_case"] = {k: v / n for k, v in reads.items()}
print("CASE-BENCH " + json.dumps(out), flush=True)
"""


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def start_child(kernel: str, args: dict, checkout, threads: int, log_path: Path) -> subprocess.Popen:
    """A campaign of ``kernel`` in a child process whose ``difftest`` is ``checkout`` (None: this
    one), with ``threads`` OpenMP threads for it and as many for its worker."""
    root = Path(checkout).resolve() if checkout else Path(__file__).resolve().parents[2]
    path = [str(root)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), OMP_NUM_THREADS=str(threads))
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-c", _CASE_TIMER],
        cwd=str(root),
        text=True,
        env=env,
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    proc.stdin.write(json.dumps({**args, "kernel": kernel}))
    proc.stdin.close()
    proc.log_path = log_path
    return proc


def finish_child(proc: subprocess.Popen) -> dict:
    proc.wait()
    text = Path(proc.log_path).read_text()
    for line in reversed(text.splitlines()):
        if line.startswith("CASE-BENCH "):
            return json.loads(line[len("CASE-BENCH ") :])
    tail = "\n".join(text.splitlines()[-15:])
    raise RuntimeError(f"the case timer failed (exit code {proc.returncode}); its output ends:\n{tail}")


def summarise(res: dict) -> dict:
    """Per-case numbers of one campaign: framework ms per case (mean, median), phases' ms
    per case, cases per hour, the kernel's share."""
    rows = res["rows"]
    n = max(1, len(rows))
    frame = [1000 * (r["wall"] - sum(r["phases"].get(k, 0.0) for k in KERNEL_PHASES)) for r in rows]
    split = res["timing"]
    phases = {k: round(1000 * v / n, 2) for k, v in split["phases_s"].items() if v}
    wall = res["wall_s"]
    return {
        "kernel": res["kernel"],
        "cases": res["cases"],
        "wall_s": round(wall, 2),
        "worker_ready_s": round(res.get("worker_ready_s", 0.0), 2),
        "cases_per_hour": round(3600 * res["cases"] / wall) if wall else 0,
        "framework_ms_mean": round(1000 * split["overhead_s"] / n, 2),
        "framework_ms_median": round(statistics.median(frame), 2) if frame else 0.0,
        "kernel_share": round(split["kernel_s"] / wall, 4) if wall else 0.0,
        "phases_ms": phases,
        "failed_cases": res["failed_cases"],
        **(
            {"ops_per_case": res["ops_per_case"], "reads_per_case": res["reads_per_case"]}
            if "ops_per_case" in res
            else {}
        ),
    }


def run_case_bench(kernels, mode: str, args: dict, before=None, out_dir=None, log=print) -> list[dict]:
    """Rows of ``summarise`` for each (mode, kernel, checkout): alone, each kernel's campaign
    with ``before`` (when given) right before the same campaign with this checkout, so the two
    meet the same machine load; side by side, all of ``before``'s campaigns, then all of ours."""
    out_dir = Path(out_dir or ".difftest/bench-cases")
    out_dir.mkdir(parents=True, exist_ok=True)
    cores = usable_cores()
    checkouts = ((("before", before),) if before else ()) + (("after", None),)
    rows = []
    for m in ("alone", "side") if mode == "both" else (mode,):
        if m == "alone":
            for k in kernels:
                for label, checkout in checkouts:
                    res = finish_child(
                        start_child(k, args, checkout, max(1, cores // 2), out_dir / f"{label}-{m}-{k}.log")
                    )
                    rows.append({"checkout": label, "mode": m, **summarise(res)})
                    log(_line(rows[-1]))
        else:
            threads = max(1, cores // (2 * len(kernels)))
            for label, checkout in checkouts:
                procs = [start_child(k, args, checkout, threads, out_dir / f"{label}-{m}-{k}.log") for k in kernels]
                for p in procs:
                    rows.append({"checkout": label, "mode": m, **summarise(finish_child(p))})
                    log(_line(rows[-1]))
    return rows


def _line(r: dict) -> str:
    top = sorted(r["phases_ms"].items(), key=lambda kv: -kv[1])[:6]
    return (
        f"{r['checkout']:>6} {r['mode']:<5} {r['kernel']:<16} {r['cases']:5d} cases {r['wall_s']:8.1f} s "
        f"{r['cases_per_hour']:7d}/h  framework {r['framework_ms_mean']:7.1f} ms/case (median case "
        f"{r['framework_ms_median']:.1f})  " + ", ".join(f"{k} {v:.1f}" for k, v in top)
    )


PHASE_COLUMNS = (
    "truth",
    "truth_compile",
    "yardsticks",
    "gates",
    "inputs",
    "transfer",
    "search",
    "worker_start",
    "compile",
    "kernel",
    "determinism",
)


def markdown(rows: list) -> str:
    head = (
        [
            "checkout",
            "mode",
            "kernel",
            "cases",
            "wall s",
            "cases/h",
            "framework ms/case",
            "median case ms",
            "kernel share",
        ]
        + [f"{p} ms" for p in PHASE_COLUMNS]
        + ["failed cases"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [
            r["checkout"],
            r["mode"],
            r["kernel"],
            str(r["cases"]),
            f"{r['wall_s']:.1f}",
            str(r["cases_per_hour"]),
            f"{r['framework_ms_mean']:.1f}",
            f"{r['framework_ms_median']:.1f}",
            f"{100 * r['kernel_share']:.1f}%",
        ] + [f"{r['phases_ms'].get(p, 0.0):.1f}" for p in PHASE_COLUMNS]
        lines.append("| " + " | ".join(cells + [str(r["failed_cases"])]) + " |")
    if any("ops_per_case" in r for r in rows):
        lines += [
            "",
            "| checkout | mode | kernel | ATen ops/case by phase (this process) | host reads/case |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            if "ops_per_case" in r:
                ops = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["ops_per_case"].items(), key=lambda kv: -kv[1]))
                reads = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["reads_per_case"].items(), key=lambda kv: -kv[1]))
                lines.append(f"| {r['checkout']} | {r['mode']} | {r['kernel']} | {ops} | {reads} |")
    return "\n".join(lines)
