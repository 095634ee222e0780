"""Opening files under a log dir without ever following a symbolic link out of it.

A broker trusts its log dirs; this engine is run by users on directories anyone may have
touched, so a symlinked partition directory, segment, index or lock file could make a writable
command truncate or rename files anywhere on the machine. Every open under a log dir goes
through this module: files are opened with ``O_NOFOLLOW`` (directories with ``O_DIRECTORY |
O_NOFOLLOW``) and a symlink is refused with an error naming it. Kafka has no such check (its
``LocalLog`` opens whatever the directory holds); this is a deliberate difference.

A hard link is no way out to follow, but a write through it is one: a segment linked to a file
outside the log dir would be appended to and truncated by recovery under both names. So a file
with more than one name is refused wherever the engine would write it in place (a writable open,
and the load's and the stats' check of a partition's segment files), naming it.

For the same reason a path where a file belongs may hold a FIFO, a socket, a device or a
directory. A blocking open of a FIFO waits for a writer forever, and reading a directory fails
with an ``EISDIR`` that names no path, so every open here is non-blocking and is refused unless
``fstat`` shows a regular file (a directory for ``open_dir_nofollow``), naming the path.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from ..errors import NotRegularFileError, UnsafePathError

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def _refuse(path: Path | str) -> UnsafePathError:
    return UnsafePathError(f"{path} is a symbolic link: refusing to follow it out of the log dir")


def _check_one_name(path: Path | str, links: int) -> None:
    if links > 1:
        raise UnsafePathError(f"{path} has {links} hard links: a write would change it under its other names too, "
                              "which may be outside the log dir; refusing to use it (replace it with a copy of its own)")


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_kind(mode: int | None) -> str:
    """What a file of ``mode`` (``st_mode``) is, for messages: "a FIFO", "a directory", ..."""
    return next((name for test, name in _KINDS if mode is not None and test(mode)), "not a regular file")


def _not_regular(path: Path | str, mode: int | None, wanted: str) -> NotRegularFileError:
    return NotRegularFileError(f"{path} is {file_kind(mode)}, where {wanted} belongs: refusing to open it")


def _lstat_mode(path: Path | str) -> int | None:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return None


def open_nofollow(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symlink as the last component (``ELOOP``), and anything but a
    regular file (a directory when ``flags`` hold ``O_DIRECTORY``), with an error naming the path.

    ``O_NONBLOCK`` lets the open of a FIFO return at once (``ENXIO`` for writing without a
    reader, and for a socket); the kind is then checked with ``fstat`` on the descriptor, so a
    file swapped in after a check cannot slip through, and the flag is cleared again.
    """
    wants_dir = bool(flags & os.O_DIRECTORY)
    wanted = "a directory" if wants_dir else "a regular file"
    try:
        fd = os.open(path, flags | _NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(path) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):  # a directory opened for writing; a FIFO or socket
            raise _not_regular(path, _lstat_mode(path), wanted) from None
        raise
    try:
        st = os.fstat(fd)
        kind = st.st_mode
        if not (stat.S_ISDIR(kind) if wants_dir else stat.S_ISREG(kind)):
            raise _not_regular(path, kind, wanted)
        if flags & (os.O_WRONLY | os.O_RDWR):
            _check_one_name(path, st.st_nlink)
        if not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


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


def check_regular_or_missing(path: Path | str) -> None:
    """Refuse ``path`` if it is a symlink, or exists and is not a regular file: a log dir's own
    files (locks, checkpoints, the shutdown marker) are checked so before a command writes."""
    _check_kind_or_missing(path, stat.S_ISREG, "a regular file")


def check_dir_or_missing(path: Path | str) -> None:
    """Refuse ``path`` if it is a symlink, or exists and is not a directory (a log dir's own
    folders, such as the topic metadata's), naming it."""
    _check_kind_or_missing(path, stat.S_ISDIR, "a directory")


def _check_kind_or_missing(path: Path | str, is_kind: Callable[[int], bool], wanted: str) -> None:
    mode = _lstat_mode(path)
    if mode is None:
        return
    if stat.S_ISLNK(mode):
        raise _refuse(path)
    if not is_kind(mode):
        raise _not_regular(path, mode, wanted)


def check_dir_entries(directory: Path | str) -> None:
    """Refuse a directory that is a symlink or holds one (a partition dir and its files), or
    holds a FIFO, a socket or a device: refused here, before a command repairs or writes
    anything in the directory, rather than at the open that reaches it part way through."""
    check_not_symlink(directory)
    try:
        with os.scandir(directory) as it:
            for entry in it:
                check_dir_entry(entry)
    except FileNotFoundError:
        return


def check_dir_entry(entry: os.DirEntry) -> None:
    """Refuse one entry of a partition dir that is a symlink, a FIFO, a socket or a device."""
    if entry.is_symlink():
        raise _refuse(entry.path)
    if not entry.is_file(follow_symlinks=False) and not entry.is_dir(follow_symlinks=False):
        raise _not_regular(entry.path, _lstat_mode(entry.path), "a regular file")


def check_file_entry(entry: os.DirEntry) -> None:
    """Refuse a directory entry that is a symlink, not a regular file (a directory named as a
    segment's ``.log``, say) or a file with other names (hard links), naming it: found by a
    listing, before anything is opened or changed."""
    check_dir_entry(entry)
    if not entry.is_file(follow_symlinks=False):
        raise _not_regular(entry.path, _lstat_mode(entry.path), "a regular file")
    _check_one_name(entry.path, entry.stat(follow_symlinks=False).st_nlink)


def check_under(path: Path | str, root: Path | str) -> Path:
    """``path`` resolved, after checking it stays under ``root`` (a name from disk may hold ``..``)."""
    resolved = Path(os.path.realpath(path))
    base = Path(os.path.realpath(root))
    if resolved != base and base not in resolved.parents:
        raise UnsafePathError(f"{path} resolves to {resolved}, outside the log dir {base}")
    return resolved
