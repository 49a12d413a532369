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
    """None when ``path`` is a writable directory (created if missing: the campaign would
    create it anyway), else one line naming ``what`` (e.g. '--out'), the path and why.
    Writability is probed by creating a file, so it holds for root and read-only mounts."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{what} {str(path)!r} is a file: allowed a directory (existing or to be created)"
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
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
