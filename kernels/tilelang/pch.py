"""A precompiled header for our TileLang kernels' CPU builds (target ``"c"``).

Every CPU build ends in one g++ run on the C++ TileLang generates, which includes TileLang's
``tl_templates/cpp/common.h`` (half.hpp and the C++ standard headers: 70,000 lines). Parsing
it was most of each g++ run (measured on the 2-core box: the dsink kernel 0.39 -> 0.11 s, the
main kernel 0.49 -> 0.23 s with a PCH), paid 25 times by a cold ``difftest run``'s prebuild.

Every build passes ``-include <folder>/tl_common.h``: a one-line wrapper that includes the
real header. g++ reads ``tl_common.h.gch`` beside it instead when that is a valid PCH for
the same compiler and flags, and parses the header otherwise (a missing, foreign or damaged
``.gch`` is skipped by g++ itself); the kernel's code is the same either way (``objdump -d``
equal, measured for each case). ``build()`` makes the ``.gch`` once, before a prebuild's
pool starts (warm.py), ~1 s of g++.

The flags are part of TileLang's cache key, so they must not change from run to run: the
folder is named by a hash of what the PCH depends on that g++ does not check itself (the
compiler binary's path, size and mtime, TileLang's version and template headers, the
flags), and ``include_flags`` is ``[]`` only where the folder cannot be trusted. g++ trusts
an accepted PCH (its code goes into every kernel), so the folder is treated like any file
difftest reads back: ``difftest-pch`` and the hashed folder must be real folders (no link)
of this user's that no one else can write, the wrapper must hold exactly our line, and a
``.gch`` that is a link, not a regular file or over ``MAX_BYTES`` is removed before g++
could read it. A folder refused means builds without the flag (a TileLang cache miss and a
fresh build: slower, never a different kernel)."""

import hashlib
import json
import os
import stat
import subprocess
import tempfile
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from difftest.safeio import check_private_dir, ensure_dir

FORMAT = 1
WRAPPER = b"#include <tl_templates/cpp/common.h>\n"
MAX_BYTES = 512 * 2**20  # g++ 12's PCH of common.h at -O2: 48 MB
BUILD_TIMEOUT_S = 300.0
BASE_FLAGS = ("-std=c++17", "-fPIC")  # what TileLang's libgen passes g++ before ours


def _tilelang_paths() -> tuple[str | None, str | None]:
    """(g++ TileLang uses, TileLang's template folder), None where unknown."""
    # lazy: tilelang is optional and seconds to import; this runs only where a build does
    from tilelang.contrib.cc import get_cplus_compiler
    from tilelang.env import TILELANG_TEMPLATE_PATH

    return get_cplus_compiler(), TILELANG_TEMPLATE_PATH


def _digest(compiler: str, templates: str, flags: tuple) -> str | None:
    """The hash naming the folder (module docstring), None when an input cannot be read."""
    try:
        exe = os.path.realpath(compiler if os.sep in compiler else _which(compiler))
        st = os.stat(exe)
        headers = Path(templates) / "tl_templates" / "cpp"
        text = hashlib.sha256()
        for p in sorted(headers.iterdir()):
            if p.is_file():
                text.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    except (OSError, TypeError):
        return None
    try:
        tl = version("tilelang")
    except PackageNotFoundError:
        tl = "unknown"
    body = [FORMAT, exe, st.st_size, st.st_mtime_ns, tl, text.hexdigest(), list(BASE_FLAGS), list(flags)]
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()[:32]


def _which(name: str) -> str:
    for d in os.get_exec_path():
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise OSError(f"{name} not found")


def _wrapper_ok(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        return stat.S_ISREG(st.st_mode) and f.read(len(WRAPPER) + 1) == WRAPPER


def _drop_bad_pch(gch: Path) -> None:
    """Remove a ``.gch`` g++ must not read: a link, not a regular file, oversized."""
    try:
        st = os.lstat(gch)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES or st.st_uid != os.geteuid():
        if stat.S_ISDIR(st.st_mode):
            raise OSError(f"{gch} is a folder")
        os.unlink(gch)


def _cache_root() -> str:
    """TileLang's disk cache folder: ``TILELANG_CACHE_DIR``, which cache.py sets when unset
    (imported first by the adapter and warm.py; not imported here, cache.py imports source.py)."""
    return os.environ.get("TILELANG_CACHE_DIR", "")


@lru_cache(maxsize=8)
def _prepared(flags: tuple, cache_root: str) -> tuple[str, str, Path] | None:
    """(compiler, templates, wrapper path) with the folder under ``cache_root`` (TileLang's
    cache folder) checked and the wrapper in place; None where the PCH cannot be used (then
    builds go without it). Once per process and cache folder: the flags stay the same."""
    try:
        compiler, templates = _tilelang_paths()
    except Exception:  # noqa: BLE001 -- no TileLang, no build to speed up
        return None
    if not compiler or not templates:
        return None
    digest = _digest(compiler, templates, flags)
    if digest is None:
        return None
    if not cache_root:
        return None
    root = Path(cache_root)
    folder = root / "difftest-pch" / digest
    wrapper = folder / "tl_common.h"
    if any(c.isspace() for c in str(wrapper)):
        return None  # TileLang splits each compile flag on white space
    try:
        ensure_dir(root)
        for p in (folder.parent, folder):  # made private; an existing one is checked, never repaired
            try:
                os.mkdir(p, 0o700)
            except FileExistsError:
                pass
            if p.is_symlink() or check_private_dir(p) is not None:
                return None
        if not _wrapper_ok(wrapper):
            fd, tmp = tempfile.mkstemp(prefix=".tl_common.", suffix=".tmp", dir=folder)
            with os.fdopen(fd, "wb") as f:
                f.write(WRAPPER)
            os.replace(tmp, wrapper)
            if not _wrapper_ok(wrapper):
                return None
        _drop_bad_pch(folder / "tl_common.h.gch")
    except OSError:
        return None
    return compiler, templates, wrapper


def include_flags(flags) -> list[str]:
    """The flags that make a build with ``flags`` use the PCH (``[]``: none usable)."""
    ready = _prepared(tuple(flags), _cache_root())
    return [] if ready is None else ["-include", str(ready[2])]


def build(flags) -> str:
    """Make the PCH for builds with ``flags`` unless it is there; returns what happened
    ("cached", "built", or why not). Never raises: without a PCH builds parse the header."""
    ready = _prepared(tuple(flags), _cache_root())
    if ready is None:
        return "unusable"
    compiler, templates, wrapper = ready
    gch = wrapper.with_name(wrapper.name + ".gch")
    try:
        _drop_bad_pch(gch)
        if gch.exists():
            return "cached"
        fd, tmp = tempfile.mkstemp(prefix=".tl_common.", suffix=".gch.tmp", dir=wrapper.parent)
        os.close(fd)
        cmd = [compiler, *BASE_FLAGS, *flags, "-x", "c++-header", f"-I{templates}", str(wrapper), "-o", tmp]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=BUILD_TIMEOUT_S, check=False)
            if r.returncode != 0:
                return f"g++ failed ({r.returncode})"
            os.replace(tmp, gch)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"[:200]
    return "built"
