"""A cleaner's staged output as the log sees it: the cleaner lock, and removing a dead cleaner's files.

A cleaner writes replacement segments before it holds the partition lock, so its output must
survive other processes reloading the log meanwhile: the loader deletes ``.cleaned`` files on
sight (Kafka's rule for a dead cleaner's output), so live output is staged under names the
loader leaves alone: ``<base>.log.cleaning`` (and its indexes) for the local cleaner,
``.logplat-staging-<job>/`` directories for remote (Spark) tasks (``cleaner.staging``).

Only one cleaner works on a partition at a time (an ``flock`` on ``.logplat-cleaner.lock``,
taken without waiting), so whoever holds that lock knows every staged file it did not write
itself is stale, and removes it. A writable load (``loader``) does the same when it can take
the lock, so a killed cleaner's output never outlives the next reload. The names, the lock and
the removal live here, below the cleaner, because the log's loader applies the rule too.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from ..errors import LogChangedError
from ..files.naming import is_digits
from ..files.nofollow import open_nofollow

CLEANER_LOCK_FILE = ".logplat-cleaner.lock"
STAGING_SUFFIX = ".cleaning"
REMOTE_STAGING_PREFIX = ".logplat-staging-"


class CleanerBusyError(LogChangedError):
    """Another process is cleaning this partition right now."""


class CleanerLock:
    """Only one cleaner per partition at a time (Kafka's "in progress" state)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CLEANER_LOCK_FILE
        self.fd = -1

    def acquire(self) -> bool:
        """Take the lock without waiting; False when another process holds it."""
        fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held by another process; any other error is a real one
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the flock
            self.fd = -1

    def __enter__(self) -> CleanerLock:
        if not self.acquire():
            raise CleanerBusyError(f"{self.path.parent.name} is being cleaned by another process")
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def remove_stale_staging(directory: Path) -> list[str]:
    """Remove every staged file and remote staging directory; the caller holds the cleaner lock."""
    gone = []
    for entry in os.scandir(directory):
        if entry.name.endswith(STAGING_SUFFIX) and is_digits(entry.name[:1]):
            os.unlink(entry.path)
            gone.append(entry.name)
        elif entry.name.startswith(REMOTE_STAGING_PREFIX) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
            gone.append(entry.name + "/")
    return gone


def remove_staging_if_idle(directory: Path) -> list[str]:
    """What a writable load does: remove staged output unless a cleaner is at work right now."""
    if not any(
        e.name.endswith(STAGING_SUFFIX) or e.name.startswith(REMOTE_STAGING_PREFIX) for e in os.scandir(directory)
    ):
        return []
    lock = CleanerLock(directory)
    if not lock.acquire():
        return []
    try:
        return remove_stale_staging(directory)
    finally:
        lock.release()
