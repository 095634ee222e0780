"""Durable writes: a file replaced whole, a directory entry made to survive a crash.

Kafka writes a checkpoint to ``<file>.tmp``, fsyncs it, renames it over the file and fsyncs the
directory (``Utils.atomicMoveWithFallback`` and ``Utils.flushDir``), so a crash leaves either the
old or the new content, never a mix. Every small file the engine rewrites (checkpoints, topic
metadata, the log dir's id) goes through :func:`atomic_write`; every rename or unlink that must
survive a crash is followed by :func:`fsync_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .nofollow import open_dir_nofollow, open_nofollow

#: Kafka's suffix for a file being written before it is renamed into place
TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside ``path`` durable (a directory entry lives in the directory)."""
    fd = open_dir_nofollow(path)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, tmp: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new bytes, never a mix.

    The ``.tmp`` name is Kafka's, so a ``.tmp`` a broker left behind is simply overwritten.
    Concurrent writers of one file must serialise (``CheckpointFile.update`` does): they share
    the ``.tmp`` name. ``tmp`` overrides it where ``<name>.tmp`` could pass NAME_MAX (topic
    metadata of a 249-character topic).
    """
    path = Path(path)
    tmp = tmp if tmp is not None else path.with_name(path.name + TMP_SUFFIX)
    try:
        tmp.unlink()
    except FileNotFoundError:
        pass
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)  # a full disk or a size limit leaves no (empty) .tmp behind
        raise OSError(exc.errno, exc.strerror, str(path)) from None  # the error names the file
    fsync_dir(path.parent)
