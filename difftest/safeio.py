"""Files that survive a kill: atomic writes, and output paths checked before a campaign.

``atomic_write_text`` writes a temporary file next to the target and ``os.replace``s
it, so a reader (or a campaign killed mid-write) only ever sees the old file or the new
one, never half of one. It is difftest's one writer of files, with one permission policy:
a file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask), not
the 0600 of the temporary file, so reports, reproducers and logs read alike for whoever
may read the folder. ``check_writable_dir`` / ``check_writable_file`` let the CLI
refuse an unusable ``--out``, ``--report`` or ``--db`` before the first case runs,
instead of after the whole campaign.
"""

import contextlib
import os
import tempfile
from pathlib import Path


def default_mode() -> int:
    """0666 less this process's umask: the mode ``open(path, "w")`` creates files with."""
    try:  # Linux: read without changing it (os.umask would, for a moment, for every thread)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path, text: str, mode: int | None = None) -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + os.replace),
    with ``mode`` (default: ``default_mode()``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, default_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def check_writable_dir(path, what: str) -> str | None:
    """None when ``path`` is a writable directory or can be created as one, else one line
    naming ``what`` (e.g. '--out'), the path and why. Nothing is created: a refused command
    leaves no folder behind. Writability is probed by creating (and removing) a temporary
    file in ``path`` or its nearest existing ancestor, so it holds for root and read-only mounts."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{what} {str(path)!r} is a file: allowed a directory (existing or to be created)"
    probe = path
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail
            return f"{what} {str(path)!r} is not a writable directory (a dangling symbolic link): allowed a " \
                   "writable directory"
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, "Not a directory")
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        return f"{what} {str(path)!r} is not a writable directory ({e.strerror or e}): allowed a writable directory"
    return None


def check_writable_file(path, what: str) -> str | None:
    """None when a file can be written at ``path`` (its folder is created), else one line."""
    path = Path(path)
    if path.is_dir():
        return f"{what} {str(path)!r} is a directory: allowed a file path"
    why = check_writable_dir(path.parent, what)
    if why is not None:
        return f"{what} {str(path)!r}: its folder " + why.split(" ", 2)[2]
    if path.exists() and not os.access(path, os.W_OK):
        return f"{what} {str(path)!r} is not writable: allowed a writable file path"
    return None


@contextlib.contextmanager
def safe_child_path():
    """Within the block, Python processes started from here (multiprocessing's spawn, a
    ProcessPoolExecutor's workers, ``subprocess`` with ``sys.executable``) get a safe import
    path: ``PYTHONSAFEPATH=1``, as ``python -P``, so the working directory (a checkout of
    someone's pull request) is not put first on their ``sys.path`` and a planted
    ``multiprocessing.py`` there is never imported. The variable is restored afterwards."""
    old = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = old


# ---------------------------------------------------------------- reading hostile files
MAX_JSON_DEPTH = 64  # difftest's own files nest at most ~8 deep (report > campaign > case > verdict > numbers)
MAX_JSON_BYTES = 64 * 2**20  # the largest report under results/ is 2.3 MB uncompressed


def read_capped(path, max_bytes: int, error, what: str = "file") -> bytes:
    """The bytes of ``path`` (``.xz``: decompressed as a stream), refused with ``error``
    (one line) once they pass ``max_bytes``: a small ``.xz`` cannot expand into gigabytes
    in memory, nor a huge file be read whole, before anything is parsed."""
    import lzma

    path = Path(path)
    try:
        if path.is_symlink() is False and path.is_dir():
            raise error(f"{path}: is a directory: allowed a {what}")
        if path.suffix == ".xz":
            chunks, n = [], 0
            with lzma.open(path) as f:
                while True:
                    chunk = f.read(1 << 20)
                    if not chunk:
                        break
                    n += len(chunk)
                    if n > max_bytes:
                        raise error(f"{path}: expands to more than {max_bytes} bytes: allowed at most that "
                                    f"(a {what} is far smaller)")
                    chunks.append(chunk)
            return b"".join(chunks)
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{path}: no such file: allowed a {what}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory: allowed a {what}") from None
    except (OSError, lzma.LZMAError, EOFError) as e:
        raise error(f"{path}: cannot read ({getattr(e, 'strerror', None) or e}): allowed a {what}") from None
    if len(data) > max_bytes:
        raise error(f"{path}: more than {max_bytes} bytes: allowed at most that (a {what} is far smaller)")
    return data


def check_json_value(obj, where: str, error, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse (with ``error``, one line) what ``json.loads`` accepts but difftest cannot use
    safely: nesting deeper than ``max_depth``, and strings that are not valid Unicode (a
    lone surrogate such as ``\\ud800``, which would fail later when printed or written)."""
    stack = [(obj, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > max_depth:
            raise error(f"{where}: nested deeper than {max_depth} levels: allowed a file difftest wrote")
        if isinstance(v, dict):
            for k, x in v.items():
                _check_text(k, where, error)
                stack.append((x, depth + 1))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, str):
            _check_text(v, where, error)


def _check_text(s: str, where: str, error) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise error(f"{where}: a string holds an unpaired surrogate ({ascii(s[:30])}): allowed valid Unicode") from None


def parse_json(data, where: str, error, max_depth: int = MAX_JSON_DEPTH):
    """``data`` (bytes or str) parsed as JSON, every problem a one-line ``error``: not UTF-8,
    not JSON, an integer of more than 4300 digits, nesting deeper than ``max_depth`` (the
    C parser's own recursion limit is caught too), a lone surrogate."""
    import json

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{where}: not UTF-8 text (byte {e.start}): allowed a JSON file difftest wrote") from None
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON (truncated or edited?): {e.msg} at line {e.lineno} "
                    f"column {e.colno}") from None
    except RecursionError:
        raise error(f"{where}: nested deeper than {max_depth} levels: allowed a file difftest wrote") from None
    except ValueError as e:  # an integer beyond int_max_str_digits
        raise error(f"{where}: {str(e).splitlines()[0][:120]}: allowed a JSON file difftest wrote") from None
    check_json_value(obj, where, error, max_depth)
    return obj


def read_json(path, error, what: str = "JSON file", max_bytes: int = MAX_JSON_BYTES):
    """``read_capped`` + ``parse_json``: a file difftest wrote, or a one-line ``error``."""
    return parse_json(read_capped(path, max_bytes, error, what), str(path), error)


NONFINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def finite_json(obj):
    """``obj`` with every non-finite float written as the string ``"inf"``, ``"-inf"`` or
    ``"nan"``: ``json.dumps`` would write ``Infinity``/``NaN``, which is not JSON (other
    tools refuse the file). ``report.read.load_report`` turns them back into floats."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else str(obj)
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def json_text(obj, **kw) -> str:
    """Strict JSON text of ``obj`` (``finite_json``; other objects as ``str``)."""
    import json

    return json.dumps(finite_json(obj), allow_nan=False, default=str, **kw)
