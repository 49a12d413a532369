"""Files that survive a kill and follow no planted link: atomic writes, output paths
checked before a campaign, and hostile files read with bounds.

``atomic_write_text`` writes a temporary file next to the target and ``os.replace``s
it, so a reader (or a campaign killed mid-write) only ever sees the old file or the new
one, never half of one. It is difftest's one writer of files, with one permission policy:
a file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask), not
the 0600 of the temporary file, so reports, reproducers and logs read alike for whoever
may read the folder. ``check_writable_dir`` / ``check_writable_file`` let the CLI
refuse an unusable ``--out``, ``--report`` or ``--db`` before the first case runs,
instead of after the whole campaign.

**No symbolic link is followed under a folder difftest writes to.** A working directory
may be someone's checkout and an output folder may be shared, so a link planted where
difftest writes (``.difftest/out -> ../baseline``, a run's ``repro -> ~/bin``, a case log
``-> ~/.bashrc``) would send its files elsewhere. ``ensure_dir`` makes a folder component
by component and refuses a link or a non-folder on the way among the *guarded* components:
every component of a relative path (it lies in the working directory), every component
from a ``.difftest`` one down, and those below a ``root`` the caller owns (a run folder,
its ``repro/``, the failure store's folder); an absolute path's other components are
taken as the user named them. Files are then made without following a link:
``atomic_write_text`` writes a fresh temporary (``O_EXCL``) and renames it over the
target (a rename replaces a link, never writes through it), ``open_append`` opens with
``O_NOFOLLOW``. A refusal is an ``OSError`` (``ELOOP``, ``ENOTDIR``) naming the path:
``cli.main`` prints it as one line with exit code 2, and a campaign stops on it as on a
full disk (``OutputFailed``, resumable).

Files read back from a folder (a run folder's report, summary or case log; the pytest
parts) are opened the same way (``read_capped(..., root=FOLDER)``), and every file read
must be a regular file: a FIFO, ``/dev/zero`` or a directory is refused before a byte is
read (a FIFO is opened ``O_NONBLOCK``, so it cannot hang the open). ``check_private_dir``
is the test for a folder whose code runs (TileOPs' site): owned by this user, writable
by no one else.
"""

import contextlib
import errno
import json
import lzma
import os
import stat
import tempfile
from pathlib import Path

from difftest.workdir import WORKDIR


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


# ---------------------------------------------------------------- no link followed
LINK_WHY = "a symbolic link where difftest writes (it follows none): allowed a real folder or file; remove the link"
NOT_DIR_WHY = "not a folder where difftest writes: allowed a real folder"


def _guarded(path: Path, root) -> list[bool]:
    """For each prefix of ``path`` (``parts[:i+1]``), whether it is guarded: every one of a
    relative path, those from a ``.difftest`` component down, those strictly below ``root``."""
    parts = path.parts
    rel = not path.is_absolute()
    try:
        owned = parts.index(WORKDIR)
    except ValueError:
        owned = len(parts)
    below = len(parts)
    if root is not None and parts[: len(Path(root).parts)] == Path(root).parts:
        below = len(Path(root).parts)
    return [rel or i >= owned or i >= below for i in range(len(parts))]


def unsafe_component(path, root=None) -> tuple[Path, str] | None:
    """(component, why) of the first guarded component of ``path`` (see the module
    docstring) that is a link; None when there is none. Creates nothing (the preflight of
    an output path; what is not a folder, the writability probe finds)."""
    path = Path(path)
    for i, guarded in enumerate(_guarded(path, root)):
        prefix = Path(*path.parts[: i + 1])
        try:
            st = os.lstat(prefix)
        except FileNotFoundError:
            return None
        except OSError:
            return None  # unreadable: the writability probe says why
        if stat.S_ISLNK(st.st_mode) and guarded:
            return prefix, LINK_WHY
    return None


def ensure_dir(path, root=None) -> Path:
    """``mkdir -p path`` following no link among its guarded components (module docstring);
    ``OSError`` (``ELOOP``/``ENOTDIR``, the offending component as its filename) otherwise."""
    path = Path(path)
    for i, guarded in enumerate(_guarded(path, root)):
        prefix = Path(*path.parts[: i + 1])
        try:
            st = os.lstat(prefix)
        except FileNotFoundError:
            try:
                os.mkdir(prefix)
            except FileExistsError:
                pass
            st = os.lstat(prefix)
        if stat.S_ISLNK(st.st_mode):
            if guarded:
                raise OSError(errno.ELOOP, LINK_WHY, str(prefix))
            st = os.stat(prefix)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(errno.ENOTDIR, NOT_DIR_WHY, str(prefix))
    return path


def open_append(path, root=None, mode: int = 0o666) -> int:
    """A file descriptor of ``path`` opened to read and append (created with ``mode`` less
    the umask), its folder made by ``ensure_dir`` and the file itself never a link."""
    path = Path(path)
    ensure_dir(path.parent, root)
    try:
        return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, LINK_WHY, str(path)) from None
        raise


def check_tree(path, depth: int = 2) -> tuple[Path, str] | None:
    """(entry, why) of the first link, or thing other than a folder or regular file, in the
    folder ``path`` down to ``depth`` levels (a database another tool writes into: a planted
    link inside it would be written through or read); None when there is none or no folder."""
    todo = [(Path(path), 1)]
    while todo:
        folder, level = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if e.is_symlink():
                return Path(e.path), LINK_WHY
            if e.is_dir(follow_symlinks=False):
                if level < depth:
                    todo.append((Path(e.path), level + 1))
            elif not e.is_file(follow_symlinks=False):
                return Path(e.path), "not a regular file: allowed the files difftest and Hypothesis write"
    return None


def check_private_dir(path) -> str | None:
    """None when ``path`` is a folder owned by this user that no one else may write to
    (a folder whose code runs: a site folder on a child's ``PYTHONPATH``); else why not."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"{str(path)!r} cannot be read ({e.strerror or e})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{str(path)!r} is not a folder"
    if st.st_uid != os.geteuid():
        return f"{str(path)!r} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return (
            f"{str(path)!r} is writable by its group or by everyone (mode {stat.S_IMODE(st.st_mode):o}): "
            "allowed mode 0700 or 0755"
        )
    return None


def atomic_write_text(path, text: str, mode: int | None = None, root=None) -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same folder + os.replace),
    with ``mode`` (default: ``default_mode()``). The folder is made by ``ensure_dir`` (no
    link followed among its guarded components, ``root`` included); a link at ``path``
    itself is replaced, never written through."""
    path = Path(path)
    ensure_dir(path.parent, root)
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
    bad = unsafe_component(path)
    if bad is not None:
        return f"{what} {str(path)!r}: {str(bad[0])!r} is {bad[1]}"
    if path.exists() and not path.is_dir():
        return f"{what} {str(path)!r} is a file: allowed a directory (existing or to be created)"
    probe = path
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail
            return (
                f"{what} {str(path)!r} is not a writable directory (a dangling symbolic link): allowed a "
                "writable directory"
            )
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
    bad = unsafe_component(path.parent)
    if bad is not None:
        return f"{what} {str(path)!r}: {str(bad[0])!r} is {bad[1]}"
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


def open_regular(path, error, what: str = "file", root=None):
    """``path`` open for reading in binary, or a one-line ``error``: missing, a directory,
    not a regular file (a FIFO is opened without blocking and refused, a device such as
    ``/dev/zero`` too). With ``root`` (the folder the file was found in) no guarded
    component nor the file itself may be a link (``ensure_dir``'s rule): a run folder's
    ``summary.md -> ~/.ssh/id_rsa`` is refused, not copied."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if root is not None:
        bad = unsafe_component(path.parent, root)
        if bad is not None:
            raise error(f"{path}: {str(bad[0])!r} is a symbolic link: allowed a {what} inside {str(root)!r}")
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{path}: cannot read: no such file: allowed a {what}") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory: allowed a {what}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise error(f"{path}: is a symbolic link: allowed a {what} inside {str(root)!r}") from None
        raise error(f"{path}: cannot read ({e.strerror or e}): allowed a {what}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise error(f"{path}: is {kind}: allowed a {what}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_capped(path, max_bytes: int, error, what: str = "file", root=None) -> bytes:
    """The bytes of ``path`` (``.xz``: decompressed as a stream), refused with ``error``
    (one line) once they pass ``max_bytes``: a small ``.xz`` cannot expand into gigabytes
    in memory, nor a huge file be read whole, before anything is parsed. Only a regular
    file is read (``open_regular``; ``root``: found in that folder, no link followed)."""
    path = Path(path)
    with open_regular(path, error, what, root) as raw:
        try:
            if path.suffix == ".xz":
                chunks, n = [], 0
                with lzma.open(raw) as f:
                    while True:
                        chunk = f.read(1 << 20)
                        if not chunk:
                            break
                        n += len(chunk)
                        if n > max_bytes:
                            raise error(
                                f"{path}: expands to more than {max_bytes} bytes: allowed at most that "
                                f"(a {what} is far smaller)"
                            )
                        chunks.append(chunk)
                return b"".join(chunks)
            data = raw.read(max_bytes + 1)
        except (OSError, lzma.LZMAError, EOFError) as e:
            raise error(f"{path}: cannot read ({getattr(e, 'strerror', None) or e}): allowed a {what}") from None
    if len(data) > max_bytes:
        raise error(f"{path}: more than {max_bytes} bytes: allowed at most that (a {what} is far smaller)")
    return data


def read_lines(path, error, what: str, max_line: int, max_bytes: int, root=None):
    """The lines of a JSON-lines file (a case log, a variant log), one ``bytes`` at a time
    with its number, streamed: a line longer than ``max_line`` or a file past ``max_bytes``
    is a one-line ``error`` (``/dev/zero`` and a line-less gigabyte never reach memory)."""
    path = Path(path)
    n = 0
    with open_regular(path, error, what, root) as f:
        for i, line in enumerate(iter(lambda: f.readline(max_line + 1), b""), 1):
            n += len(line)
            if len(line) > max_line and not line.endswith(b"\n"):
                raise error(f"{path}:{i}: a line longer than {max_line} bytes: allowed a {what}")
            if n > max_bytes:
                raise error(f"{path}: more than {max_bytes} bytes: allowed a {what} at most that large")
            yield i, line


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
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{where}: not UTF-8 text (byte {e.start}): allowed a JSON file difftest wrote") from None
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as e:
        raise error(
            f"{where}: not valid JSON (truncated or edited?): {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    except RecursionError:
        raise error(f"{where}: nested deeper than {max_depth} levels: allowed a file difftest wrote") from None
    except ValueError as e:  # an integer beyond int_max_str_digits
        raise error(f"{where}: {str(e).splitlines()[0][:120]}: allowed a JSON file difftest wrote") from None
    check_json_value(obj, where, error, max_depth)
    return obj


def read_json(path, error, what: str = "JSON file", max_bytes: int = MAX_JSON_BYTES, root=None):
    """``read_capped`` + ``parse_json``: a file difftest wrote, or a one-line ``error``."""
    return parse_json(read_capped(path, max_bytes, error, what, root), str(path), error)


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
    return json.dumps(finite_json(obj), allow_nan=False, default=str, **kw)
