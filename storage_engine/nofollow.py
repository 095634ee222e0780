"""Opening files under a log dir without ever following a symbolic link out of it.

A broker trusts its log dirs; this engine is run by users on directories anyone may have
touched, so a symlinked partition directory, segment, index or lock file could make a writable
command truncate or rename files anywhere on the machine. Every open under a log dir goes
through this module: files are opened with ``O_NOFOLLOW`` (directories with ``O_DIRECTORY |
O_NOFOLLOW``) and a symlink is refused with an error naming it. Kafka has no such check (its
``LocalLog`` opens whatever the directory holds); this is a deliberate difference.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import UnsafePathError

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse(path: Path | str) -> UnsafePathError:
    return UnsafePathError(f"{path} is a symbolic link: refusing to follow it out of the log dir")


def open_nofollow(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symlink as the last component (``ELOOP``) with a clear error."""
    try:
        return os.open(path, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path) from None
        raise


def open_dir_nofollow(path: Path | str) -> int:
    """A read-only descriptor of a directory that is not a symlink (for ``fsync`` of entries)."""
    return open_nofollow(path, os.O_RDONLY | os.O_DIRECTORY)


def read_bytes_nofollow(path: Path | str) -> bytes:
    """A whole small file (metadata, checkpoints), read without following a symlink."""
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_not_symlink(path: Path | str) -> None:
    """Refuse ``path`` if it is a symlink; a missing path is fine (nothing to follow)."""
    if os.path.islink(path):
        raise _refuse(path)


def check_dir_entries(directory: Path | str) -> None:
    """Refuse a directory that is a symlink or holds one (a partition dir and its files)."""
    check_not_symlink(directory)
    try:
        with os.scandir(directory) as it:
            for entry in it:
                if entry.is_symlink():
                    raise _refuse(entry.path)
    except FileNotFoundError:
        return


def check_under(path: Path | str, root: Path | str) -> Path:
    """``path`` resolved, after checking it stays under ``root`` (a name from disk may hold ``..``)."""
    resolved = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    if resolved != base and base not in resolved.parents:
        raise UnsafePathError(f"{path} resolves to {resolved}, outside the log dir {base}")
    return resolved
