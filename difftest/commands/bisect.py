"""``difftest bisect``: a reproducer replayed across versions (difftest/investigate/bisect.py): first
bad, last good; ``--run`` for ``git bisect run``."""

import json
import os
import shutil
import tempfile
from pathlib import Path

from difftest.argcheck import positive_float
from difftest.errors import InputError
from difftest.investigate.bisect import (
    DEFAULT_BUILD_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    EXIT_FOUND,
    EXIT_NOT_FOUND,
    RUN_EXIT,
    UNTESTABLE,
    BisectAbort,
    BisectError,
    Bisector,
    Version,
    check_subdir,
    git_versions,
    parse_versions,
    read_versions_file,
)
from difftest.printable import block, cell
from difftest.safeio import atomic_write_text

HELP = "replay a reproducer across versions (wheels, folders, a git range): first bad, last good (--fixed: the fix)"


# ---------------------------------------------------------------- command line
def add_arguments(p) -> None:
    p.add_argument("reproducer", help="a .json reproducer (difftest repro's input)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--versions",
        nargs="+",
        metavar="VERSION",
        help="versions oldest first: .whl files or install folders (several for one version joined by ',')",
    )
    src.add_argument("--versions-file", metavar="FILE", help="the same, one version a line ('#' comments)")
    src.add_argument("--git", metavar="REPO", help="a git repository: test the commits of --range")
    src.add_argument(
        "--run",
        action="store_true",
        help="test one tree (--here, default the current directory) for `git bisect run`: exit 0 "
        "good, 1 bad, 125 untestable (128 on bad input, so git bisect stops)",
    )
    p.add_argument("--range", metavar="OLD..NEW", help="with --git: OLD (good) and the commits up to NEW (bad)")
    p.add_argument(
        "--build",
        metavar="CMD",
        help="with --git/--run: shell command run in the tree before testing it "
        "(a failure makes the version untestable)",
    )
    p.add_argument(
        "--path",
        default=".",
        metavar="SUBDIR",
        help="with --git/--run: the folder of the tree to import from (default: its root)",
    )
    p.add_argument("--here", metavar="DIR", help="with --run: the tree to test (default: the current directory)")
    p.add_argument("--kernel", help="replay against this kernel instead of the reproducer's")
    p.add_argument(
        "--allow-import",
        action="store_true",
        help="trust a 'module:attr' kernel named in the file (the child imports it)",
    )
    p.add_argument(
        "--any-failure",
        action="store_true",
        help="any failing verdict is bad (default: the failure the reproducer documents; another "
        "failure makes the version untestable); a version that does not load here (ImportError, "
        "module 'x' has no attribute 'y', ...) stays untestable unless the reproducer documents that error",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds for one version's replay before it counts as hung (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--build-timeout",
        type=positive_float,
        default=DEFAULT_BUILD_TIMEOUT_S,
        help=f"seconds for one --build (default {DEFAULT_BUILD_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--work",
        metavar="DIR",
        help="folder for unpacked wheels, checkouts, builds and logs, kept and reused (default: a "
        "temporary folder, removed at the end)",
    )
    p.add_argument(
        "--fixed",
        action="store_true",
        help="find the release that fixed the reproducer's bug: versions oldest first are bad ... bad, "
        "good ... good; names the first good (the fix) and the last bad",
    )
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON here")


def _versions(a) -> list[Version]:
    if a.range and not a.git:
        raise BisectError("--range needs --git REPO")
    if a.git and not a.range:
        raise BisectError("--git needs --range OLD..NEW")
    if (a.build or a.path != ".") and not (a.git or a.run):
        raise BisectError("--build and --path apply to --git and --run (wheels and folders are used as they are)")
    if a.here and not a.run:
        raise BisectError("--here applies to --run only")
    if a.versions:
        return parse_versions(a.versions)
    if a.versions_file:
        return read_versions_file(a.versions_file)
    return git_versions(a.git, a.range)


def command(a) -> int:
    run_mode = bool(a.run)
    # absolute: the replay children run in folders under it (a relative --work made every version untestable)
    work = Path(a.work).absolute() if a.work else Path(tempfile.mkdtemp(prefix="difftest-bisect-"))
    try:
        try:
            check_subdir(a.path)
            if a.work and Path(a.work).exists() and not Path(a.work).is_dir():
                raise BisectError(f"--work {a.work!r} is not a directory: allowed a folder (created if missing)")
            if a.json and Path(a.json).is_dir():
                raise BisectError(f"--json {a.json!r} is a directory: allowed a file path")
            versions = None if run_mode else _versions(a)
            if run_mode and (a.git or a.range):
                raise BisectError("--run tests one tree: --git and --range do not apply")
            here = Path(a.here or os.getcwd())
            if run_mode and a.fixed:
                raise BisectError("--fixed searches a version list: --run tests one tree")
            if run_mode and not here.is_dir():
                raise BisectError(f"--here {str(here)!r}: not a directory")
            b = Bisector(
                Path(a.reproducer),
                work,
                kernel=a.kernel,
                allow_import=a.allow_import,
                any_failure=a.any_failure,
                timeout=a.timeout,
                build=a.build,
                build_timeout=a.build_timeout,
                subdir=a.path,
                repo=Path(a.git) if a.git else None,
            )
        except InputError as e:
            if run_mode:
                raise BisectAbort(str(e)) from None
            raise
        if run_mode:
            roots, why = b.tree_roots(here, work / "logs" / "run", reuse=False)
            verdict, detail = (UNTESTABLE, why) if roots is None else b.test_roots(roots, "run")
            print(cell(f"bisect: {here}: {verdict} ({detail})"), flush=True)
            return RUN_EXIT[verdict]
        res = b.bisect(versions, fixed=a.fixed)
        print(block(res.summary()), flush=True)
        if a.json:
            atomic_write_text(a.json, json.dumps({"reproducer": str(b.repro), **res.to_dict()}, indent=1) + "\n")
        return EXIT_FOUND if res.found else EXIT_NOT_FOUND
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
