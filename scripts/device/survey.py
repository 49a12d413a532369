"""Survey a kernel on the H200: N distinct drawn problems (plus the edge corpus), every case
judged and kept, every distinct failure triaged and shrunk. A campaign stops drawing at the
first failure and spends the rest on shrinking it; a survey keeps drawing, so a results file
can say "N cases, these failures, of these kinds" for a kernel with a known finding.

    python3 scripts/device/survey.py --out DIR [--seconds S] [--shrink S] [--second-reference fa3]
                                     [--narrow FIELD=VALUES ...] [--seed N]
                                     [--new-compile-p P --warm-configs N] [--edge-seconds S] KERNEL CASES

Unseeded by default (each run draws afresh, as a new user's would). Writes DIR/KERNEL.cases.jsonl
(one line per case as it finishes), DIR/KERNEL.survey.json (counts per status and triage, worst
ratio per output, the distinct failures with their shrunk problem and reproducer) and
reproducers under DIR/repro/.

``--edge-seconds`` caps the edge-corpus phase, for a kernel that compiles per configuration
(flex: 300 edge problems, 277 configurations at ~2.6 s each on the H200, so the corpus alone
outlasts a 250 s survey and no drawn case ever ran). Drawn problems then reuse only the
configurations the edge phase actually compiled (``--warm-configs`` is capped to them).
For flex: ``--seconds 270 --edge-seconds 50 --new-compile-p 0.03 --warm-configs 16 flex 200``
(its key pins nearly every field, so the effective rate of new configurations is several
times ``--new-compile-p``: see strategies/compile.py).
"""

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis import seed as hseed

from difftest.execute import adapter as registry
from difftest.execute.isolation import COMPILE_TIMEOUT_S
from difftest.judge.runner import RunConfig, run_case
from difftest.model.capability import parse_narrowing
from difftest.search.reproducer import write_reproducer
from difftest.search.shrinking import simplify
from difftest.strategies import edge_problems, problems
from difftest.strategies.compile import compile_reuse


def triage_of(case) -> str:
    try:
        from difftest.judge.triage import classify
    except ImportError:
        return str(case.status)
    return str(classify(case))


def signature(case) -> tuple:
    """What makes two failures 'the same finding': the triage kind and the failed gates,
    or the exception type for a case that raised."""
    head = (case.reason or "").splitlines()[0] if case.reason else ""
    err = head.split(":", 1)[0] if case.status == "error" else ""
    return (triage_of(case), tuple(sorted(case.failed_gates)), err)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=300.0, help="stop drawing after this many seconds")
    ap.add_argument("--shrink", type=float, default=40.0, help="seconds of shrinking per distinct failure")
    ap.add_argument("--max-shrinks", type=int, default=3, help="distinct failures to shrink")
    ap.add_argument("--second-reference", default=None)
    ap.add_argument("--narrow", action="append", default=[])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds of a case's kernel calls (builds excluded)")
    ap.add_argument("--compile-timeout", type=float, default=COMPILE_TIMEOUT_S,
                    help="seconds of a case's JIT builds before it is a 'build timeout' (not a hang)")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--det-runs", type=int, default=0, help="also N bitwise-repeated calls on fixed problems")
    ap.add_argument("--det-first", action="store_true",
                    help="run the --det-runs calls before the survey, not after it (a lane cut short by its "
                         "timeout still has them)")
    ap.add_argument("--new-compile-p", type=float, default=0.1,
                    help="probability a draw opens a new compile configuration (strategies/compile.py)")
    ap.add_argument("--warm-configs", type=int, default=4,
                    help="edge-corpus compile configurations drawn problems reuse (all of them after a --warm)")
    ap.add_argument("--edge-seconds", type=float, default=None,
                    help="stop the edge corpus after this many seconds (default: --seconds)")
    ap.add_argument("kernel")
    ap.add_argument("cases", type=int)
    a = ap.parse_args(argv)
    if a.edge_seconds is not None and a.edge_seconds < 0:
        ap.error(f"--edge-seconds={a.edge_seconds}: allowed a number of seconds >= 0")
    if not a.compile_timeout > 0:
        ap.error(f"--compile-timeout={a.compile_timeout}: allowed a number of seconds > 0")
    if not 0.0 <= a.new_compile_p <= 1.0 or a.warm_configs < 1:
        ap.error(f"--new-compile-p={a.new_compile_p} / --warm-configs={a.warm_configs}: allowed a probability "
                 "in [0, 1] and an integer >= 1")
    out = Path(a.out)
    (out / "repro").mkdir(parents=True, exist_ok=True)
    kernel = registry.narrow(registry.get(a.kernel), **parse_narrowing(a.narrow))
    why = kernel.available()
    if why:
        print(f"{a.kernel}: unavailable: {why}", flush=True)
        (out / f"{a.kernel}.survey.json").write_text(json.dumps({"kernel": a.kernel, "unavailable": why}))
        return 0
    if a.det_runs > 1 and a.det_first:
        run_determinism(kernel, a.det_runs, out)
    config = RunConfig(isolate=True, second_reference=a.second_reference, timeout_s=a.timeout,
                       compile_timeout_s=a.compile_timeout)
    log = open(out / f"{a.kernel}.cases.jsonl", "a")
    cases, seen = [], set()
    t0 = time.perf_counter()

    def judge(p, source):
        if p in seen:
            return None
        seen.add(p)
        c = run_case(kernel, p, config)
        cases.append(c)
        d = c.to_dict()
        d["source"], d["triage"] = source, triage_of(c)
        log.write(json.dumps(d, default=str) + "\n")
        log.flush()
        return c

    edge_s = a.seconds if a.edge_seconds is None else min(a.seconds, a.edge_seconds)
    for p in edge_problems(kernel.capability, a.profile):
        if time.perf_counter() - t0 > edge_s:
            break
        judge(p, "edge")
    n_edge = len(cases)
    # the edge phase ran a prefix of the corpus, so its first distinct configurations are
    # exactly the ones warm_problems hands the strategy: reuse no more than were compiled
    compiled = len({kernel.capability.compile_signature(c.problem) for c in cases})
    warm_configs = max(1, min(a.warm_configs, compiled)) if kernel.capability.compile_key else a.warm_configs

    drawn = [0]

    @settings(max_examples=a.cases * 3, database=None, deadline=None, phases=[Phase.generate, Phase.target],
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(problems(kernel.capability, a.profile, new_compile_p=a.new_compile_p, warm_configs=warm_configs))
    def draw(p):
        if drawn[0] >= a.cases or time.perf_counter() - t0 > a.seconds:
            return
        c = judge(p, "drawn")
        if c is not None:
            drawn[0] += 1
            target(min(c.worst_ratio, 1e6), label="worst ratio")

    if a.seed is not None:
        draw = hseed(a.seed)(draw)
    draw()
    search_s = time.perf_counter() - t0

    failures = defaultdict(list)
    for c in cases:
        if c.failed:
            failures[signature(c)].append(c)
    findings = []
    for sig, group in sorted(failures.items(), key=lambda kv: -len(kv[1])):
        first = group[0]
        row = {"signature": list(sig), "cases": len(group), "triage": sig[0], "first": first.problem.short(),
               "reason": (first.reason or "").splitlines()[:1], "failed_gates": first.failed_gates}
        if len(findings) < a.max_shrinks:
            def still(p, sig=sig):
                return signature(run_case(kernel, p, config)) == sig

            small, calls = simplify(first.problem, still, kernel.capability, time_budget=a.shrink)
            shrunk = run_case(kernel, small, config)
            row.update(shrunk=small.short(), shrunk_problem=small.to_dict(), shrink_calls=calls,
                       reproducer=write_reproducer(kernel, shrunk, config, out / "repro")["json"])
        findings.append(row)
    worst = defaultdict(float)
    for c in cases:
        for o, r in c.ratios().items():
            worst[o] = max(worst[o], r)
    summary = {"kernel": a.kernel, "spec": getattr(kernel, "spec", a.kernel), "narrowed": a.narrow,
               "second_reference": a.second_reference, "seed": a.seed, "cases": len(cases), "edge": n_edge,
               "drawn": drawn[0], "search_seconds": round(search_s, 1), "new_compile_p": a.new_compile_p,
               "warm_configs": warm_configs, "edge_seconds": a.edge_seconds,
               "compile_reuse": compile_reuse(cases, kernel.capability),
               "seconds": round(time.perf_counter() - t0, 1),
               "status": dict(Counter(str(c.status) for c in cases)),
               "triage": dict(Counter(triage_of(c) for c in cases if c.failed)),
               "worst_ratio": dict(worst), "findings": findings}
    (out / f"{a.kernel}.survey.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: v for k, v in summary.items() if k != "findings"}, default=str), flush=True)
    for f in findings:
        print(f"  {f['cases']:4d} x {f['triage']:20s} {f['failed_gates']} first {f['first']}"
              f" -> {f.get('shrunk', '(not shrunk)')}", flush=True)
    from difftest.execute.isolation import close_all

    close_all()
    if a.det_runs > 1 and not a.det_first:
        run_determinism(kernel, a.det_runs, out)
    return 0


def run_determinism(kernel, runs: int, out: Path) -> None:
    """``runs`` bitwise-repeated calls on campaigns.DET_PROBLEMS, written to KERNEL.determinism.json."""
    sys.path.insert(0, str(Path(__file__).parent))
    from campaigns import determinism

    rows = determinism(kernel, runs)
    (out / f"{kernel.name}.determinism.json").write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    raise SystemExit(main())
