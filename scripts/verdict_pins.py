"""Verdicts of a fixed set of cases, written to a file, and two such files compared bit for bit:
the evidence that a speed change left every verdict as it was (results/speed.md).

    python3 scripts/verdict_pins.py record OUT.json [--draws 30] [--isolate] [--kernels K ...]
    python3 scripts/verdict_pins.py compare BEFORE.json AFTER.json

The cases: for each kernel, its ci edge corpus, ``--draws`` Problems the ci profile draws
(seed 0) and, for torch-blockwise, ``--draws`` small ``gpu``-profile draws (at most 2^22
score x head-dim elements, so the CPU runs them); every mutant of the catalogue on its own
example Problem (failing verdicts: worst elements, poison, non-finite values). Each case is
``run_case`` with the campaign's RunConfig (``--isolate``: the kernel in the worker
process, as ``difftest run`` does). A record is ``CaseResult.to_dict`` without its seconds:
status, every verdict's numbers (floats as Python writes them, which read back to the same
bits), messages, worst elements, notes, the input digest. ``compare`` prints the number of
cases and every difference (exit 1 when there is one). Threads: one per process, so the
CPU BLAS adds in one order on both sides.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

DEFAULT_KERNELS = ("torch-blockwise", "sdpa-cpu-math", "sdpa-cpu-flash", "tilelang-det")
GPU_DRAW_LIMIT = 2**22  # score elements x head dim of a gpu-profile draw run here
UNPINNED_CLASSES = ("nondeterminism",)  # mutants whose outputs differ from call to call by design (OS entropy)


def _drawn(capability, profile: str, count: int, limit: float | None = None) -> list:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from difftest.strategies.problems import problems

    out = []

    @hseed(0)
    @settings(max_examples=count * (8 if limit else 1), suppress_health_check=list(HealthCheck), database=None,
              phases=[Phase.generate], deadline=None)
    @given(problems(capability, profile))
    def draw(p):
        if len(out) < count and (limit is None or p.size() <= limit):
            out.append(p)

    draw()
    return out


def cases(kernels, draws: int) -> list:
    """(kernel spec, Problem) pairs, in a fixed order."""
    from difftest import strategies
    from difftest.execute import adapter as registry
    from difftest.kernels.mutants import MUTANTS

    out = []
    for name in kernels:
        k = registry.get(name)
        if k.available():
            print(f"verdict_pins: {name} unavailable here ({k.available()}): left out", file=sys.stderr)
            continue
        ps = list(strategies.edge_problems(k.capability, "ci")) + _drawn(k.capability, "ci", draws)
        if name == "torch-blockwise":
            ps += _drawn(k.capability, "gpu", draws, GPU_DRAW_LIMIT)
        out += [(name, p) for p in dict.fromkeys(ps)]
    for m in MUTANTS.values():
        if m.example is not None and m.bug_class not in UNPINNED_CLASSES:
            out.append((f"mutant:{m.name}", m.example))
    return out


def record(path: str, kernels, draws: int, isolate: bool) -> int:
    import torch

    from difftest.execute import adapter as registry
    from difftest.execute.isolation import close_all
    from difftest.judge.runner import RunConfig, run_case

    torch.set_num_threads(1)
    config = RunConfig(isolate=isolate)
    rows, t0 = [], time.perf_counter()
    for spec, p in cases(kernels, draws):
        d = run_case(registry.get(spec), p, config).to_dict()
        for key in ("seconds", "kernel_seconds"):
            d.pop(key, None)
        rows.append({"kernel": spec, **d})
    close_all()
    with open(path, "w") as f:
        json.dump({"isolate": isolate, "cases": rows}, f, indent=0, sort_keys=True)
    print(f"verdict_pins: {len(rows)} cases ({sum(r['status'] == 'failed' for r in rows)} failed) in "
          f"{time.perf_counter() - t0:.1f} s -> {path}")
    return 0


def compare(a: str, b: str) -> int:
    with open(a) as f:
        ra = json.load(f)["cases"]
    with open(b) as f:
        rb = json.load(f)["cases"]
    diffs = []
    if len(ra) != len(rb):
        diffs.append(f"{len(ra)} cases against {len(rb)}")
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x != y:
            keys = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))
            diffs.append(f"case {i} ({x['kernel']}, {json.dumps(x['problem'])[:120]}): {keys}")
    print(f"verdict_pins: {min(len(ra), len(rb))} cases compared, {len(diffs)} differences")
    for d in diffs[:20]:
        print("  " + d)
    return 1 if diffs else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--draws", type=int, default=30)
    r.add_argument("--isolate", action="store_true")
    r.add_argument("--kernels", nargs="+", default=list(DEFAULT_KERNELS))
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    a = ap.parse_args(argv)
    if a.cmd == "record":
        return record(a.out, a.kernels, a.draws, a.isolate)
    return compare(a.before, a.after)


if __name__ == "__main__":
    sys.exit(main())
