"""``difftest sanitize``: .json reproducers (or a run's findings) under compute-sanitizer, one run
per tool (difftest/investigate/sanitize.py)."""

import argparse
from pathlib import Path

from difftest.argcheck import check_outputs, positive_float
from difftest.errors import EXIT_FAILED, EXIT_PASSED, EXIT_SKIPPED, UsageError
from difftest.investigate.sanitize import (
    DEFAULT_TIMEOUT_S,
    ERRORS,
    HEAD,
    NOT_RUN,
    NOTE,
    TOOLS,
    attach,
    check_reproducer,
    find_sanitizer,
    inside_run,
    rows,
    run_files,
    run_reproducers,
    sanitize,
    sidecar,
)
from difftest.model.profiles import PROFILES
from difftest.printable import block, cell
from difftest.report.write import text_table

HELP = "run .json reproducers (or a run's findings) under compute-sanitizer: memcheck, racecheck, ..."


# ---------------------------------------------------------------- command line
def _tools(text: str) -> tuple:
    tools = tuple(dict.fromkeys(t.strip() for t in str(text).split(",") if t.strip()))
    bad = [t for t in tools if t not in TOOLS]
    if bad or not tools:
        raise argparse.ArgumentTypeError(f"{str(text)[:80]!r}: allowed a comma-separated subset of {','.join(TOOLS)}")
    return tools


def add_arguments(p) -> None:
    p.add_argument("files", nargs="*", metavar="REPRO.json", help=".json reproducers written by difftest")
    p.add_argument(
        "--run-dir",
        metavar="DIR",
        help="sanitize every finding of a run (the reproducers its report.json names) and add the "
        "results to its report.json, findings.json and summary.md",
    )
    p.add_argument("--tools", type=_tools, default=TOOLS, help=f"comma-separated (default {','.join(TOOLS)})")
    p.add_argument("--sanitizer", metavar="PATH", help="compute-sanitizer's path (default: compute-sanitizer on PATH)")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds per tool before its run is ended (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument("--kernel", help="replay against another kernel (as difftest repro --kernel)")
    p.add_argument(
        "--allow-import",
        action="store_true",
        help="trust a 'module:attr' kernel named in the file (as difftest repro --allow-import)",
    )
    p.add_argument("--profile", "-p", choices=sorted(PROFILES), help="size limits (as difftest repro -p)")
    p.add_argument(
        "--keep-pools",
        action="store_true",
        help="leave PyTorch's and XLA's memory pools on (by default they are off in the children, so "
        "memcheck sees an overflow into a neighbouring buffer)",
    )


def command(a) -> int:
    if not a.files and not a.run_dir:
        raise UsageError("nothing to sanitize: allowed REPRO.json files and/or --run-dir DIR")
    sanitizer, missing = find_sanitizer(a.sanitizer)
    run_dir, named, skipped = (Path(a.run_dir) if a.run_dir else None), [], []
    doc = None
    if run_dir is not None:
        if not run_dir.is_dir():
            raise UsageError(f"--run-dir {a.run_dir!r}: not a folder: allowed a run's output folder")
        doc, found = run_reproducers(run_dir)
        files = run_files(run_dir)
        for kernel, kind, fid, recorded in found:
            p = inside_run(run_dir, recorded)
            if p is None:
                skipped.append(f"{kernel} {kind} {fid}: {recorded!r} not found inside {str(run_dir)!r}: not replayed")
            else:
                named.append((recorded, p))
    paths = [(None, Path(f)) for f in a.files] + named
    for _, p in paths:  # every input checked before the first tool runs (exit 2, nothing written)
        check_reproducer(p, a)
        check_outputs(files=[("sidecar", sidecar(p))])
    records, done = [], {}
    for recorded, p in dict(((str(p.resolve()), (r, p)) for r, p in paths)).values():
        rec = sanitize(p, a, a.tools, sanitizer, missing)
        records.append(rec)
        if recorded is not None:
            done[recorded] = rec
    for rec in records:
        for r in rec["tools"].values():
            if r["first"]:
                print(
                    block(f"{Path(rec['reproducer']).name} {r['tool']}: first error:\n    " + "\n    ".join(r["first"]))
                )
    print(text_table([HEAD] + rows(records)) if records else "no reproducer to sanitize")
    print(f"note: {NOTE} (memcheck does not see inside a framework's memory pool; racecheck sees shared memory only)")
    for rec in records:
        print(f"wrote {cell(sidecar(rec['reproducer']))}")
    for s in skipped:
        print(f"skipped: {cell(s)}")
    if doc is not None:
        for f in attach(run_dir, doc, done, files):
            print(f"updated {cell(f)}")
    tools = [r for rec in records for r in rec["tools"].values()]
    if any(r["status"] == ERRORS for r in tools):
        return EXIT_FAILED
    if any(rec["cuda"] and all(r["status"] == NOT_RUN for r in rec["tools"].values()) for rec in records):
        return EXIT_SKIPPED
    return EXIT_PASSED
