"""``difftest mutants``: the mutant catalogue run (detection power); difftest/measure/mutants.py
measures it."""

import json
import sys

from difftest.argcheck import UsageError, check_device, check_outputs, nonneg_float, positive_float, positive_int
from difftest.execute.adapter import catalogue as catalogue_for
from difftest.model.profiles import PROFILES

HELP = "run the mutant catalogue (detection power)"


def add_arguments(p) -> None:
    p.add_argument("--profile", "-p", default="ci", choices=sorted(PROFILES), help="campaign profile (default ci)")
    p.add_argument(
        "--time-budget",
        type=positive_float,
        default=None,
        help="seconds for the whole run; exceeding it fails (default: per profile, ci 900)",
    )
    p.add_argument(
        "--per-mutant-budget",
        type=positive_float,
        default=None,
        help="search seconds per mutant, also the grid's budget (default: per profile, ci 90)",
    )
    p.add_argument("--shrink-budget", type=nonneg_float, default=None, help="shrink seconds per mutant (ci 20)")
    p.add_argument(
        "--max-examples", type=positive_int, default=None, help="examples per campaign (default: the profile's)"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", default=None, help="run only these mutants")
    p.add_argument(
        "--grid",
        dest="grid",
        action="store_true",
        default=False,
        help="also run the FlashAttention-style grid baseline, side by side",
    )
    p.add_argument("--no-grid", dest="grid", action="store_false")
    p.add_argument("--out", default=None, help="write the markdown table here (e.g. results/mutants.md)")
    p.add_argument("--out-dir", default=None, help="campaign logs and reproducers per mutant")
    p.add_argument(
        "--database", default=None, help="Hypothesis example database (default none: every run searches afresh)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="run every mutant and its clean kernel on this device (default: each mutant's own; the "
        "blockwise catalogue is device-agnostic torch, so --device cuda runs it on the GPU)",
    )
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")


def command(args) -> int:
    # lazy: keeps torch off --help
    from difftest.judge.runner import RunConfig
    from difftest.measure.mutants import fmt_n, fmt_s, render_markdown, run_mutants, write_results

    catalogue = catalogue_for("mutant")

    if args.list:
        for m in catalogue.entries().values():
            print(f"{m.name:32s} {m.bug_class:15s} {m.description}")
        for src, why in catalogue.skipped().items():
            print(f"(skipped {src}: {why})")
        return 0
    unknown = sorted(set(args.only or ()) - set(catalogue.entries()))
    if unknown:
        raise UsageError(f"--only {' '.join(unknown)}: unknown mutants; allowed names from `difftest mutants --list`")

    def show(row):
        if not args.json:
            extra = f"  grid: {row.grid_status} ({fmt_s(row.grid_seconds)} s)" if row.grid_status else ""
            print(
                f"{row.name:32s} {row.status:9s} {fmt_n(row.examples):>4s} ex {fmt_s(row.seconds):>6s} s  "
                f"{', '.join(row.gates[:2])}{extra}",
                file=sys.stderr,
                flush=True,
            )

    check_outputs(args.out_dir, [("--out", args.out)])  # before the catalogue runs
    device = getattr(args, "device", None)
    if device:
        check_device(device)
    report = run_mutants(
        args.only,
        args.profile,
        per_mutant_budget=args.per_mutant_budget,
        shrink_budget=args.shrink_budget,
        time_budget=args.time_budget,
        max_examples=args.max_examples,
        grid=args.grid,
        out_dir=args.out_dir,
        database=args.database,
        progress=show,
        config=RunConfig(device=device) if device else None,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(render_markdown(report))
    if args.out:
        write_results(
            report,
            args.out,
            "difftest mutants " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["mutants"] else "difftest mutants",
        )
    return 0 if report.ok else 1
