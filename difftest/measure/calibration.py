"""Calibration: measure how much error correct kernels really make, so the error
budget's k is set from data rather than guessed.

``difftest calibrate -k KERNEL ...`` runs campaigns with the budget gate opened wide
(k = 1e9: nothing fails on error size) and reports, per dtype and output, the
distribution of ``k_needed`` (the smallest k that would have passed each case).
"""

import json
import math
from collections import defaultdict

from difftest.judge.gates import GateConfig
from difftest.judge.runner import RunConfig
from difftest.model.problem import OUTPUTS

OPEN_K = 1e9


def collect(kernels, profile="ci", max_examples=200, time_budget=None, seed=None, detail: list | None = None) -> dict:
    """{(dtype, output): [k_needed, ...]} over campaigns of (assumed correct) kernels.
    ``detail``: a list that gets one record per budget verdict (kernel, dtype, output,
    k_needed, err, ref_err, floor, problem), to see which kernel and Problem set a maximum."""
    from difftest.search.campaign import run_campaign

    data = defaultdict(list)
    cfg = RunConfig(gates=GateConfig(k={n: OPEN_K for n in OUTPUTS}))
    for k in kernels:
        res = run_campaign(k, profile, max_examples=max_examples, time_budget=time_budget, config=cfg,
                           database=None, seed=seed)
        for c in res.cases:
            for v in c.verdicts:
                if v.gate == "budget":
                    data[(c.problem.dtype, v.output)].append(v.numbers["k_needed"])
                    if detail is not None:
                        detail.append({"kernel": res.kernel, "dtype": c.problem.dtype, "output": v.output,
                                       **{n: v.numbers.get(n) for n in ("k_needed", "err", "ref_err", "floor")},
                                       "problem": c.problem.short(), "problem_json": c.problem.to_json()})
    return data


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    i = min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))
    return xs[i]


def table(data) -> str:
    lines = [f"{'dtype':9} {'output':6} {'cases':>5} {'median':>8} {'p90':>8} {'p99':>8} {'max':>8}"]
    for (dt, out) in sorted(data):
        xs = data[(dt, out)]
        lines.append(f"{dt:9} {out:6} {len(xs):5d} {quantile(xs, .5):8.3g} {quantile(xs, .9):8.3g} "
                     f"{quantile(xs, .99):8.3g} {max(xs):8.3g}")
    return "\n".join(lines)


def add_arguments(p):
    from difftest.commands.argcheck import positive_float, positive_int
    from difftest.model.profiles import PROFILES

    p.add_argument("--kernel", "-k", action="append", dest="kernels", required=True,
                   help="a correct kernel (repeatable)")
    p.add_argument("--profile", "-p", default="ci", choices=sorted(PROFILES))
    p.add_argument("--max-examples", type=positive_int, default=200)
    p.add_argument("--time-budget", type=positive_float)
    p.add_argument("--json", help="write the raw k_needed samples here")
    p.add_argument("--detail", help="write one record per case and output (kernel, Problem, numbers) here (JSON)")


def command(a) -> int:
    from difftest.commands.argcheck import check_outputs
    from difftest.execute import adapter as registry

    check_outputs(None, [("--json", a.json), ("--detail", getattr(a, "detail", None))])  # before the calibration
    detail = [] if getattr(a, "detail", None) else None
    data = collect([registry.get(n) for n in a.kernels], a.profile, a.max_examples, a.time_budget, detail=detail)
    print(table(data))
    if detail is not None:
        with open(a.detail, "w") as f:
            json.dump(detail, f)
        by_kernel = defaultdict(list)
        for r in detail:
            by_kernel[(r["kernel"], r["dtype"], r["output"])].append(r["k_needed"])
        print("\nper kernel (max k_needed):")
        for (kern, dt, out), xs in sorted(by_kernel.items()):
            print(f"{kern:18} {dt:9} {out:6} {len(xs):5d} {max(xs):8.3g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{dt}:{o}": xs for (dt, o), xs in data.items()}, f)
    return 0
