"""``difftest calibrate``: k_needed over correct kernels, or the k defaults derived from variant
logs and reports (difftest/measure/calibration.py)."""

import json
import sys
from collections import defaultdict

from difftest.argcheck import UsageError, bounded, check_outputs, positive_float, positive_int
from difftest.execute import adapter as registry
from difftest.model.profiles import PROFILES
from difftest.printable import block
from difftest.safeio import atomic_write_text

HELP = "measure k_needed over correct kernels"


def add_arguments(p):
    replays_int = bounded(
        int,
        0,
        False,
        1000,
        "replays of one derivation",
        "replays_int",
        "an integer 0..1000: cases replayed by calibrate --replay",
    )

    p.add_argument(
        "--kernel",
        "-k",
        action="append",
        dest="kernels",
        help="a correct kernel (repeatable; or derive from --from-variant-logs/--from-reports)",
    )
    p.add_argument(
        "--from-variant-logs",
        nargs="+",
        metavar="JSONL",
        default=None,
        help="derive the k defaults from `difftest variants --out-dir` case logs (runs nothing)",
    )
    p.add_argument(
        "--from-reports",
        nargs="+",
        metavar="REPORT",
        default=None,
        help="... and from campaign reports of real kernels (report.json or .json.xz)",
    )
    p.add_argument(
        "--replay",
        type=replays_int,
        default=100,
        metavar="N",
        help="replay up to N variant cases whose k_needed would raise a shipped k, judged as the "
        "shipped verdicts judge them (against the kernel's own O/LSE where those pass); 0: none",
    )
    p.add_argument("--profile", "-p", default="ci", choices=sorted(PROFILES))
    p.add_argument("--max-examples", type=positive_int, default=200)
    p.add_argument("--time-budget", type=positive_float)
    p.add_argument("--json", help="write the raw k_needed samples here")
    p.add_argument("--detail", help="write one record per case and output (kernel, Problem, numbers) here (JSON)")


def command(a) -> int:
    # lazy: keeps torch off --help
    from difftest.measure.calibration import collect, table

    check_outputs(None, [("--json", a.json), ("--detail", getattr(a, "detail", None))])  # before the calibration
    if a.from_variant_logs or a.from_reports:
        return _derive(a)
    if not a.kernels:
        raise UsageError("--kernel: required unless --from-variant-logs or --from-reports is given")
    detail = [] if getattr(a, "detail", None) else None
    data = collect([registry.get(n) for n in a.kernels], a.profile, a.max_examples, a.time_budget, detail=detail)
    print(table(data))
    if detail is not None:
        atomic_write_text(a.detail, json.dumps(detail))
        by_kernel = defaultdict(list)
        for r in detail:
            by_kernel[(r["kernel"], r["dtype"], r["output"])].append(r["k_needed"])
        print("\nper kernel (max k_needed):")
        for (kern, dt, out), xs in sorted(by_kernel.items()):
            print(f"{kern:18} {dt:9} {out:6} {len(xs):5d} {max(xs):8.3g}")
    if a.json:
        atomic_write_text(a.json, json.dumps({f"{dt}:{o}": xs for (dt, o), xs in data.items()}))
    return 0


def _derive(a) -> int:
    """``calibrate --from-variant-logs/--from-reports``: the derivation table; exit 0."""
    # lazy: keeps torch off --help
    from difftest.measure.calibration import (
        derivation_table,
        replay_high,
        samples_from_reports,
        samples_from_variant_logs,
    )

    data = defaultdict(list)
    try:
        for part in (samples_from_variant_logs(a.from_variant_logs or ()), samples_from_reports(a.from_reports or ())):
            for key, xs in part.items():
                data[key].extend(xs)
    except OSError as e:
        raise UsageError(f"cannot read {e.filename}: {e.strerror}") from None
    if not data:
        raise UsageError("no passing budget verdict in the given logs and reports: nothing to derive from")
    if a.replay:
        replay_high(data, limit=a.replay, log=lambda m: print(m, file=sys.stderr, flush=True))
    text, derived = derivation_table(data)
    print(block(text))  # kernel names and problems from the reports: printable
    if a.json:
        atomic_write_text(a.json, json.dumps({f"{dt}:{o}": k for (dt, o), k in derived.items()}))
    return 0
