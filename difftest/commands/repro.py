"""``difftest repro``: a .json reproducer replayed (difftest/search/reproducer.py); the .py beside
it is run with python, never by difftest."""

import sys

from difftest.errors import EXIT_FAILED, EXIT_PASSED, EXIT_SKIPPED
from difftest.model.profiles import PROFILES
from difftest.printable import block, cell
from difftest.search.reproducer import replay
from difftest.vocab import Status

HELP = "replay a .json reproducer (the .py is run with python, never by difftest)"


def add_arguments(sp) -> None:
    sp.add_argument("file", help="a .json reproducer written by difftest")
    sp.add_argument("--kernel", help="run it against another kernel (e.g. the fixed one)")
    sp.add_argument(
        "--allow-import",
        action="store_true",
        help="trust a 'module:attr' kernel named in the file (imports that module)",
    )
    sp.add_argument(
        "--profile",
        "-p",
        choices=sorted(PROFILES),
        help="size limits the problem must fit (default: the largest for the device it runs "
        "on: nightly on the CPU, gpu on CUDA)",
    )
    sp.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="the device to replay on (default: the one recorded; a case recorded on CUDA is "
        "refused where there is none, unless --device cpu)",
    )


def command(a) -> int:
    r = replay(
        a.file, kernel=a.kernel, allow_import=a.allow_import, profile=a.profile, device=a.device
    )  # ReproducerError: exit 2
    print(block(r.render(verbose=True)))  # the kernel's own messages: printable (printable.py)
    if r.status == Status.SKIPPED:  # nothing was replayed: neither a pass nor a finding
        why = (r.reason or "").splitlines()[0] if r.reason else ""
        print(f"difftest repro: skipped, nothing replayed: {cell(why)}", file=sys.stderr)
        return EXIT_SKIPPED
    return EXIT_FAILED if r.failed else EXIT_PASSED
