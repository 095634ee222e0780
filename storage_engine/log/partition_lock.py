"""Cross-process coordination for one partition directory.

Kafka owns a partition from one JVM; here several processes share a directory (a service
appending, the CLI reading, a Spark job compacting). Two small mechanisms make that safe:

* an exclusive ``flock`` on ``<partition>/.logplat.lock`` serializes every change to the
  partition: appends, rolls, truncation, segment deletion and swaps. Whoever holds it sees a
  directory no other process is changing, so a partial batch at the tail seen under the lock
  is a real tear left by a dead writer, never a write in progress;
* a *generation* counter in the first 8 bytes of that same file, bumped (under the lock) after
  every change to the segment list or the log start offset. Readers, who never lock, compare
  it with the value they loaded and reload when it moved. Appends do not bump it: a reader
  notices new data from the active segment's file size instead.

Kafka ignores files in a partition directory whose suffix it does not know, so the lock file
does not stop a directory from being loaded by a real broker.
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import PartitionReplacedError
from ..files.nofollow import open_nofollow

LOCK_FILE_NAME = ".logplat.lock"
_GENERATION = struct.Struct(">q")


class PartitionLock:
    """The lock file of one partition directory, opened once per process.

    ``flock`` locks belong to the open file description, so one instance must not be shared
    across a ``fork``; the engine opens a new one per process. The lock is re-entrant within
    the instance so a public operation can call another that also locks.
    """

    def __init__(self, partition_dir: Path, *, read_only: bool = False) -> None:
        self.path = Path(partition_dir) / LOCK_FILE_NAME
        self.read_only = read_only
        self._fd: int | None = None
        self._depth = 0
        self._reserved = False

    def _open(self) -> int | None:
        """The lock file's descriptor; None for a read-only user of a directory never locked."""
        if self._fd is None:
            if self.read_only:
                try:
                    self._fd = open_nofollow(self.path, os.O_RDONLY)
                except FileNotFoundError:
                    return None  # no engine process ever changed this directory
            else:
                self._fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT)
        return self._fd

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the exclusive lock for the block, waiting for it as long as it takes."""
        fd = self._open()
        if self._depth == 0 and fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if not self.read_only:
                    self.require_current()
                self._reserve_generation(fd)
            except (OSError, PartitionReplacedError):
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _reserve_generation(self, fd: int) -> None:
        """Give a lock file its generation's 8 bytes (0) the first time a writer holds it, so
        that every bump overwrites them in place. A bump that first had to allocate the file's
        block failed on a full disk, and the undo of a change the full disk refused bumps
        (``LogAppender._rollback``). Under the lock: no bump can come between the size and the write."""
        if self.read_only or self._reserved:
            return
        if os.fstat(fd).st_size < _GENERATION.size:
            try:
                os.pwrite(fd, _GENERATION.pack(0), 0)
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        self._reserved = True

    def replaced(self) -> bool:
        """True when the lock file's path no longer names the file this instance has open: the
        partition directory was deleted or renamed by another process (a topic delete), and the
        path may now lead into a new topic's directory. A path opened once per process would
        otherwise let a writer that outlived its topic create files in its successor."""
        if self._fd is None:
            return False
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return True
        mine = os.fstat(self._fd)
        return (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino)

    def require_current(self) -> None:
        """Refuse a change (:class:`PartitionReplacedError`) once the directory was replaced; the
        lock holder calls this before each change, so nothing is written in another's directory."""
        if self.replaced():
            raise PartitionReplacedError(
                f"{self.path.parent.name}: the partition directory {self.path.parent} was deleted or replaced "
                "by another process while this one held it; nothing was written there")

    @property
    def held(self) -> bool:
        return self._depth > 0

    def generation(self) -> int:
        """The current segment-list generation (0 for a directory never changed by the engine)."""
        try:
            fd = self._open()
        except FileNotFoundError:
            return -1  # the partition directory itself is gone
        if fd is None:
            return 0
        data = os.pread(fd, 8, 0)
        return _GENERATION.unpack(data)[0] if len(data) == 8 else 0

    def bump_generation(self) -> int:
        """Record that the segment list changed; must be called with the lock held."""
        if not self.held or self.read_only:
            raise RuntimeError("bump_generation() needs the partition lock, opened for writing")
        new = self.generation() + 1
        fd = self._open()
        assert fd is not None  # a writer creates the lock file
        os.pwrite(fd, _GENERATION.pack(new), 0)
        return new

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._depth = 0
            self._reserved = False
