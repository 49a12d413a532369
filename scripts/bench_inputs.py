"""Input generation and gates of a GPU campaign's Problems, before and after, in one process.

    python3 scripts/bench_inputs.py [--device cpu|cuda] [--limit N] [--max-elements E]
        --report REPORT.json.xz [--rev 853e832] [--json F] [--markdown F]

Problems: the cases of a ``gpu``-profile campaign report (results/speed.md used the H200
tilelang-det run of 2026-11-30 whose inputs phase was 52% of its wall time, kept on the branch
lab-notebook; ``--stride K``: every K-th case), the first ``--limit`` whose
q/k/v/dO hold at most ``--max-elements`` values (the CPU here cannot draw 10^9 values
twice in a benchmark). For each Problem, best of ``--repeats``, before and after in turn
(which goes first alternates from one Problem to the next):

- inputs: ``make_inputs`` with ``input_version=1`` (the serial float64 CPU generator, then
  a copy to the device: the "before") and ``input_version=2`` (difftest/model/counter_rng.py, drawn
  on the device: the "after");
- gates: ``check_outputs`` of ``gates.py`` at ``--rev`` (``git show``; skipped where the copy
  has no history) and of this checkout, on synthetic outputs of the Problem's shapes: a
  float64 truth on the device, the kernel's outputs in the Problem's dtype on
  ``--got-device`` (cpu: what the isolated worker hands back), a same-dtype yardstick.
  Host reads (``.item()``, ``float()``, ``.tolist()`` ..., each a device synchronisation
  on CUDA) are counted with a torch function mode.

Prints a table (and writes --json / --markdown): seconds summed over the Problems, the
speedup, and host reads per case. No assertion: numbers for results/speed.md.
"""

import argparse
import importlib.util
import json
import lzma
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from difftest.judge import gates as gates_now  # noqa: E402
from difftest.model import counter_rng  # noqa: E402
from difftest.model.inputs import make_inputs, torch_dtype  # noqa: E402
from difftest.model.outputs import Outputs  # noqa: E402
from difftest.model.problem import Problem  # noqa: E402

READS = ("item", "tolist", "__float__", "__int__", "__bool__", "__index__", "cpu", "numpy")


class HostReads(TorchFunctionMode):
    """Counts calls that bring a tensor's value to the host."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in READS:
            self.n += 1
        return func(*args, **(kwargs or {}))


def load_gates(rev: str):
    """gates.py as it was at ``rev``, loaded inside the difftest package (None: no history)."""
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:difftest/judge/gates.py"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "gates_before.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("difftest._gates_before", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def problems(report: Path, limit: int, max_elements: int, stride: int = 1) -> list:
    with (lzma.open(report, "rt") if report.suffix == ".xz" else open(report)) as f:
        r = json.load(f)
    out = []
    for c in r["campaigns"]:
        for case in (c.get("cases") or [])[::stride]:
            p = Problem.from_dict(case["problem"]).replace(input_version=2)
            if elements(p) <= max_elements:
                out.append(p)
            if len(out) >= limit:
                return out
    return out


def elements(p: Problem) -> int:
    return (p.total_q * p.heads_q * (p.head_dim_qk + p.head_dim_v)
            + p.total_k * p.heads_kv * (p.head_dim_qk + p.head_dim_v))


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device):
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


def synthetic_outputs(p: Problem, device, got_device):
    """(got, truth, ref): the truth in float64 on ``device``; got and ref rounded to the
    Problem's dtype (lse float32), got with a small extra error, on ``got_device``."""
    dt = torch_dtype(p.dtype)
    truth, got, ref = {}, {}, {}
    for i, (name, shape) in enumerate(Outputs.shapes(p).items()):
        if name == "dsink" and not p.sinks:
            continue
        t = counter_rng.normal(p.seed, f"bench-{name}", shape, device)
        e = counter_rng.normal(p.seed, f"bench-err-{name}", shape, device).mul_(1e-3)
        odt = torch.float32 if name in ("lse", "dsink") else dt
        truth[name] = t
        ref[name] = t.to(odt)
        got[name] = (t + e).to(odt).to(got_device)
    return Outputs(**got), Outputs(**truth), Outputs(**ref)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--got-device", default="cpu", help="where the kernel's outputs lie (cpu: isolated worker)")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--max-elements", type=int, default=4 * 10**6)
    ap.add_argument("--stride", type=int, default=1, help="every STRIDE-th case of the report (a sample of it)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rev", default="853e832", help="git revision whose gates.py is 'before'")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args(argv)
    ps = problems(a.report, a.limit, a.max_elements, a.stride)
    if not ps:
        print(f"bench_inputs: no Problem of {a.report} has <= {a.max_elements} elements", file=sys.stderr)
        return 2
    old_gates = load_gates(a.rev)
    total = sum(elements(p) for p in ps)
    print(f"{len(ps)} problems from {a.report.name}, {total / 1e6:.1f} M input values, device {a.device}, "
          f"outputs on {a.got_device}, torch threads {torch.get_num_threads()}")
    t = {"inputs_v1": 0.0, "inputs_v2": 0.0, "gates_before": 0.0, "gates_after": 0.0}
    reads = {"gates_before": 0, "gates_after": 0}
    make_inputs(ps[0], a.device)  # warm: the quantile table, CUDA context
    for j, p in enumerate(ps):
        best = {}
        flip = (lambda pairs: pairs[::-1]) if j % 2 else (lambda pairs: pairs)  # who goes first alternates
        for _ in range(a.repeats):
            for key, q in flip((("inputs_v1", p.replace(input_version=1)), ("inputs_v2", p))):
                s, _x = timed(lambda: make_inputs(q, a.device), a.device)
                best[key] = min(best.get(key, s), s)
        got, truth, ref = synthetic_outputs(p, a.device, a.got_device)
        for key, mod in flip((("gates_before", old_gates), ("gates_after", gates_now))):
            if mod is None:
                continue
            for _ in range(a.repeats):
                with HostReads() as hr:
                    s, v = timed(lambda: mod.check_outputs(p, got, truth, [ref], poisoned=True, yardstick=ref),
                                 a.device)
                best[key] = min(best.get(key, s), s)
            reads[key] += hr.n
        for key, s in best.items():
            t[key] += s
    n = len(ps)
    rows = [("inputs (make_inputs)", "v1: serial CPU generator", t["inputs_v1"], "v2: counter-based", t["inputs_v2"],
             "", "")]
    if old_gates is not None:
        rows.append(("gates (check_outputs)", f"gates.py at {a.rev}", t["gates_before"], "this checkout",
                     t["gates_after"], f"{reads['gates_before'] / n:.0f}", f"{reads['gates_after'] / n:.0f}"))
    else:
        rows.append(("gates (check_outputs)", "(no git history)", float("nan"), "this checkout", t["gates_after"],
                     "", f"{reads['gates_after'] / n:.0f}"))
    md = ["| phase | before | s | after | s | speedup | host reads/case before | after |",
          "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, b, bs, af, as_, rb, ra in rows:
        md.append(f"| {name} | {b} | {bs:.3f} | {af} | {as_:.3f} | {bs / as_:.2f}x | {rb} | {ra} |")
    text = "\n".join(md)
    print(text)
    info = {"problems": n, "input_values": total, "device": a.device, "got_device": a.got_device,
            "threads": torch.get_num_threads(), "omp": os.environ.get("OMP_NUM_THREADS"), "seconds": t,
            "host_reads_per_case": {k: v / n for k, v in reads.items()}, "rev": a.rev, "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "gpu": torch.cuda.get_device_name() if torch.device(a.device).type == "cuda" else None}
    if a.json:
        Path(a.json).write_text(json.dumps(info, indent=1))
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
