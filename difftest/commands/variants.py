"""``difftest variants``: false alarms over the catalogue of correct implementation variants
(difftest/measure/variants.py)."""

import json
import sys
from pathlib import Path

from difftest.argcheck import UsageError, check_device, nonneg_float, positive_float, positive_int
from difftest.execute.adapter import catalogue as catalogue_for
from difftest.measure.variants import CATALOGUE_OF_DEVICE, DEFAULT_PROFILE, render_markdown, rows_from_logs, run_variant
from difftest.model.profiles import PROFILES, get_profile
from difftest.printable import block
from difftest.safeio import atomic_write_text, ensure_dir

HELP = "run the correct-variant catalogue (false alarms)"


def add_arguments(p) -> None:
    p.add_argument(
        "--profile",
        "-p",
        default=None,
        choices=sorted(PROFILES),
        help="campaign profile (default nightly on the CPU: unseeded, the widest CPU draws; gpu on CUDA)",
    )
    p.add_argument(
        "--device",
        choices=sorted(CATALOGUE_OF_DEVICE),
        default="cpu",
        help="where the variants run (default cpu); cuda: each variant on the GPU, drawn over the "
        "production GPU kernels' head dims and rows (the variant-cuda catalogue)",
    )
    p.add_argument("--cases", type=positive_int, default=200, help="cases per variant (default 200)")
    p.add_argument("--per-variant-budget", type=positive_float, default=600.0, help="seconds per variant (default 600)")
    p.add_argument("--shrink-budget", type=nonneg_float, default=30.0, help="shrink seconds per failure (30)")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None, help="run only these variants")
    p.add_argument("--out-dir", default=None, help="per-variant case logs (NAME.jsonl), appended to")
    p.add_argument(
        "--from-logs",
        nargs="+",
        metavar="JSONL",
        default=None,
        help="render the table from case logs written before (runs nothing)",
    )
    p.add_argument("--out", default=None, help="write the markdown table here")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")


def command(args) -> int:
    device = getattr(args, "device", "cpu")
    if device == "cuda" and not args.from_logs and not args.list:
        check_device(device)
    profile = args.profile or DEFAULT_PROFILE[device]
    entries = catalogue_for(CATALOGUE_OF_DEVICE[device]).entries()
    if args.list:
        for v in entries.values():
            print(f"{v.name:32s} {'' if v.deterministic else '(non-deterministic) '}{v.description}")
        return 0
    if args.from_logs:
        try:
            rows = rows_from_logs(args.from_logs)
        except OSError as e:
            raise UsageError(f"--from-logs: {e.strerror}: {e.filename}") from None
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        unknown = sorted(set(args.only or ()) - set(entries))
        if unknown:
            raise UsageError(
                f"--only {' '.join(unknown)}: unknown variants; allowed names from `difftest variants --list`"
            )
        get_profile(profile)
        out_dir = Path(args.out_dir) if args.out_dir else None
        if out_dir:
            ensure_dir(out_dir)
        rows = []
        for name in args.only or list(entries):
            row = run_variant(
                entries[name],
                profile,
                cases=args.cases,
                per_variant_budget=args.per_variant_budget,
                shrink_budget=args.shrink_budget,
                log_path=None if out_dir is None else out_dir / f"{name}.jsonl",
                share_gpu=device == "cuda",
            )
            print(
                f"{row.name:32s} {row.cases:6d} cases {row.failures:3d} false alarms {row.errors:3d} errors "
                f"{row.seconds:7.0f} s",
                file=sys.stderr,
                flush=True,
            )
            rows.append(row)
    ran = "" if args.from_logs else f"{profile}, device {device}"
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=1))
    else:
        print(block(render_markdown(rows, ran)))  # log text: printable
    if args.out:
        atomic_write_text(args.out, render_markdown(rows, ran) + "\n")
    return 0 if all(r.failures == 0 and r.errors == 0 for r in rows) else 1
