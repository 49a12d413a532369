"""``difftest gate``: a candidate report against a baseline, for CI (difftest/report/ci_gate.py)."""

import math

from difftest.argcheck import UsageError, check_outputs
from difftest.errors import EXIT_FAILED, EXIT_NOTHING_CHECKED, EXIT_PASSED
from difftest.report.ci_gate import DEFAULT_GROWTH, DEFAULT_MIN_RATIO, compare, render
from difftest.report.html import render_html
from difftest.report.junit import junit_xml
from difftest.report.read import load_report
from difftest.safeio import atomic_write_text

HELP = "compare a candidate report with a baseline (CI gating)"


def add_arguments(p):
    p.add_argument("--baseline", required=True, metavar="A.json", help="report of the target branch")
    p.add_argument("--candidate", required=True, metavar="B.json", help="report of the change")
    p.add_argument(
        "--max-ratio-growth",
        type=float,
        default=DEFAULT_GROWTH,
        metavar="F",
        help=f"fail when a worst error ratio exceeds (1+F) x the baseline's (default {DEFAULT_GROWTH:g})",
    )
    p.add_argument(
        "--min-ratio",
        type=float,
        default=DEFAULT_MIN_RATIO,
        metavar="R",
        help=f"baseline ratios below R count as R for growth (default {DEFAULT_MIN_RATIO:g})",
    )
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML here (one testcase per kernel x output x gate)")
    p.add_argument("--html", metavar="FILE", help="write the candidate's HTML report with the gate on top")


def command(a) -> int:
    for name, v in (("--max-ratio-growth", a.max_ratio_growth), ("--min-ratio", a.min_ratio)):
        if not math.isfinite(v) or v < 0 or v > 1e6:
            raise UsageError(f"{name} {v!r} is invalid: allowed a finite number in [0, 1e6]")
    base, cand = load_report(a.baseline), load_report(a.candidate)  # ReportError: exit 2 (cli.main)
    check_outputs(None, [("--junit", a.junit), ("--html", a.html)])  # before writing either
    res = compare(base, cand, a.max_ratio_growth, a.min_ratio)
    print(render(res))
    if a.junit:
        atomic_write_text(a.junit, junit_xml(res))
        print(f"junit: {a.junit}")
    if a.html:
        atomic_write_text(a.html, render_html(cand, gate=res, title=f"difftest gate: {a.candidate}"))
        print(f"html: {a.html}")
    return EXIT_PASSED if res.passed else EXIT_NOTHING_CHECKED if res.checked_nothing else EXIT_FAILED
