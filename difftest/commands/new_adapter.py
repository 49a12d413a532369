"""``difftest new-adapter``: a skeleton adapter package for your own kernel (the files:
difftest/commands/scaffold.py)."""

from pathlib import Path

from difftest.argcheck import UsageError
from difftest.commands.scaffold import write_skeleton

HELP = "write a skeleton adapter package for your own kernel"


def add_arguments(sp) -> None:
    sp.add_argument("name", help="kernel name (the package is the name with '-' as '_')")
    sp.add_argument("--dir", default=".", help="folder to create the package in (default: here)")


def command(a) -> int:
    if not str(a.dir).strip() or (Path(a.dir).exists() and not Path(a.dir).is_dir()):
        raise UsageError(f"--dir {a.dir!r}: not a folder: allowed a folder (existing or to be created)")
    try:
        root = write_skeleton(a.name, a.dir)
    except (ValueError, FileExistsError, NotADirectoryError) as e:
        raise UsageError(str(e)) from None
    print(
        f"wrote {root}/ (adapter, capability, pyproject.toml entry point, a pytest test)\n"
        f"next: pip install -e {root} && difftest run -k {a.name} -p quick"
    )
    return 0
