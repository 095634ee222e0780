"""One entry of ``log.dirs``: its checkpoint files and the clean-shutdown protocol.

Kafka writes ``.kafka_cleanshutdown`` when the broker stops cleanly and deletes it as soon as
it starts, so a crash at any later point counts as unclean. Here several processes may have a
log dir open at once, so the marker must mean "every process that had this dir open closed
cleanly":

* each writing process holds a shared ``flock`` on ``<dir>/.logplat-session.lock`` while it
  has the dir open and leaves a session file ``.logplat-session.<pid>.<n>``, removed when it
  closes (matched by its whole name, and never ending in ``-<digits>``, so no topic's partition
  directory can be taken for one);
* the first writer to open the dir (it gets the lock exclusively) consumes the marker. A
  missing marker, or session files of processes that never closed, mean a process died: that
  first writer recovers every partition of the dir before it lets others in, as a broker
  does at startup;
* the last writer to close (it can upgrade to an exclusive lock and finds no other session
  file) writes the marker.
Readers (``verify``, consumers, the platform's reads) take no part in that count: a reader
holding the session lock would make the first writer after a crash take itself for a later one
and skip recovery. They pass a separate gate, ``.logplat-recovery.lock``, which a writer holds
exclusively while it decides whether it is first and, if it is, until it has recovered. Holding
the gate exclusively too, so no writer and no other reader is at the session lock meanwhile, a
reader asks whether the next writable open will recover (``refresh_recovery_pending``): read-only
views show the log as that recovery will leave it.
A process killed at any point releases its ``flock`` with its file descriptors; its session
file stays behind and so the next first writer recovers. A process in which a partition failed
to load or recover leaves its session file behind on purpose, for the same outcome.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ..errors import CleanShutdownMarkerError, LogError, NotALogDirError
from ..files.naming import is_segment_file
from ..files.nofollow import check_regular_or_missing, open_nofollow
from ..log.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LOCK_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointFile,
    consume_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from .dir_id import DIR_ID_FILE, DirIdError, assign_dir_id, read_dir_id
from .topic_store import TOPICS_DIR

SESSION_LOCK = ".logplat-session.lock"
RECOVERY_GATE = ".logplat-recovery.lock"
SESSION_FILE = re.compile(r"\.logplat-session\.[0-9]+\.[0-9]+")
_session_counter = itertools.count()


def check_distinct_ids(log_dirs: Sequence[LogDir]) -> None:
    """Refuse two log dirs with one id (``dir_id``): a copy of a log dir given beside it. Kafka
    refuses a duplicate ``directory.id``; a topic recorded as placed over the one would pass
    given the other."""
    seen: dict[str, LogDir] = {}
    for d in log_dirs:
        dir_id = d.directory_id() if d.path.is_dir() else None
        if dir_id is not None and seen.setdefault(dir_id, d) is not d:
            raise DirIdError(f"log dirs {seen[dir_id].path} and {d.path} have the same id {dir_id} ({DIR_ID_FILE}): "
                             f"one is a copy of the other; give one of them, or remove the copy's {DIR_ID_FILE} if "
                             "no topic was placed over it")


def check_is_a_log_dir(path: Path) -> None:
    """Refuse a dir holding segment files, naming one: it is a partition directory given as
    a log dir (``--log-dirs data/logs/t-0``), which read-only commands showed as holding no
    partition and writable ones wrote session files and the shutdown marker into. Refuse
    the topic metadata folder too, where a topic create would have built a log dir. A path
    that is not there (yet) passes: whether it must be is the caller's rule."""
    if path.name == TOPICS_DIR:
        raise NotALogDirError(f"{path} is the topic metadata folder of a log dir, not a log dir; give the "
                              f"directory that holds it ({path.parent})")
    try:
        with os.scandir(path) as it:
            segment = next((e.name for e in it if is_segment_file(e.name)), None)
    except (FileNotFoundError, NotADirectoryError):
        return
    if segment is not None:
        raise NotALogDirError(f"{path} holds segment files ({segment}): it is a partition directory, not "
                              f"a log dir; give the directory that holds it ({path.parent})")


def missing_log_dir(path: str | Path) -> str | None:
    """Why ``path`` is not there as a log dir ("does not exist", "is not a directory"), or None:
    a mistyped or unmounted path would read as a log dir without topics, and a write would make
    it. ``logctl`` refuses it (but for ``topic create``, which makes it) and so do the
    platform's sensors and runs."""
    if os.path.isdir(path):
        return None
    return "is not a directory" if os.path.lexists(path) else "does not exist"


def check_log_dirs(log_dirs: Sequence[Path | str]) -> list[Path]:
    """``log_dirs`` resolved, once each of them is one the engine opens: at least one, none
    given twice (Kafka's ``log.dirs`` check), none inside another or the same directory as
    another, none a partition directory or a topic metadata folder. The one rule for a list
    of log dirs, so the environment's check (``config.environment``) is the manager's."""
    if not log_dirs:
        raise LogError("at least one log directory is needed")
    paths = [Path(p).resolve() for p in log_dirs]
    if len(set(paths)) != len(paths):
        raise LogError(f"duplicate entries in log.dirs: {[str(p) for p in paths]}")
    _check_distinct_dirs(paths)
    for path in paths:
        check_is_a_log_dir(path)
    return paths


def _check_distinct_dirs(paths: Sequence[Path]) -> None:
    """Refuse a log dir inside another (``d1,d1/y-0``: the inner one read as a partition of the
    outer, a refused create wrote segments into it) and two log dirs that are one directory
    under two paths (a bind mount: a writer would wait for ever on the lock it already holds
    through the other path)."""
    for inner in paths:
        outer = next((p for p in paths if p != inner and inner.is_relative_to(p)), None)
        if outer is not None:
            raise LogError(f"log dir {inner} is inside log dir {outer}: give log dirs that do not nest")
    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue  # not made yet: two new paths are two directories
        first = seen.setdefault((st.st_dev, st.st_ino), path)
        if first != path:
            raise LogError(f"log dirs {first} and {path} are the same directory (a bind mount?): give it once")


class LogDir:
    """A log directory with its three checkpoint files."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.recovery_points = CheckpointFile(self.path, RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = CheckpointFile(self.path, LOG_START_OFFSET_CHECKPOINT)
        self.cleaner_offsets = CheckpointFile(self.path, CLEANER_OFFSET_CHECKPOINT)
        self._fd: int | None = None
        self._gate_fd: int | None = None
        self._session_file: Path | None = None
        self.first_opener = False
        self.had_clean_shutdown = True  # a writer's: the first writer found the dir closed cleanly
        self.recovery_pending = False  # a reader's: see ``refresh_recovery_pending``
        self._load_failures: set[tuple[str, int] | None] = set()  # partitions (None: the dir's scan)
        self._dir_id: str | None = None

    @property
    def checkpoint_files(self) -> tuple[CheckpointFile, CheckpointFile, CheckpointFile]:
        """The three checkpoint files a topic's partitions have entries in."""
        return self.recovery_points, self.log_start_offsets, self.cleaner_offsets

    def open_session(self, read_only: bool = False) -> None:
        """Join the dir's session; sets ``first_opener`` and ``had_clean_shutdown``.

        A read-only session (verify, consumers) only waits for a first writer's recovery to
        finish, at the gate, and notes whether the next writer will recover
        (``refresh_recovery_pending``); it neither consumes nor writes the marker, holds no
        lock afterwards and leaves no session file. A symlink, FIFO or directory in place of
        any of the dir's own files is refused first, before anything is written.
        """
        check_is_a_log_dir(self.path)
        for name in (SESSION_LOCK, RECOVERY_GATE, LOCK_FILE, CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT,
                     LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT, DIR_ID_FILE):
            check_regular_or_missing(self.path / name)
        if read_only:
            self.refresh_recovery_pending()
            return
        self.path.mkdir(parents=True, exist_ok=True)
        self._gate_fd = open_nofollow(self.path / RECOVERY_GATE, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self._gate_fd, fcntl.LOCK_EX)
        fd = open_nofollow(self.path / SESSION_LOCK, os.O_RDWR | os.O_CREAT)
        self._fd = fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.first_opener = True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._open_gate()
        if self.first_opener:
            stale = self._session_files()
            marker = consume_clean_shutdown_marker(self.path)
            self.had_clean_shutdown = marker and not stale
            for path in stale:
                path.unlink(missing_ok=True)
        self._session_file = self.path / f".logplat-session.{os.getpid()}.{next(_session_counter)}"
        os.close(open_nofollow(self._session_file, os.O_WRONLY | os.O_CREAT))

    def directory_id(self) -> str | None:
        """The dir's id (``dir_id``); None until a topic change first records the dir. Read again
        while there is none: another process may have written it since."""
        if self._dir_id is None:
            self._dir_id = read_dir_id(self.path)
        return self._dir_id

    def assign_directory_id(self) -> str:
        """The dir's id, written first if it has none; the caller holds the topics lock."""
        found = self.directory_id()
        if found is None:
            found = self._dir_id = assign_dir_id(self.path)
        return found

    def refresh_recovery_pending(self) -> None:
        """A reader's answer to "does the next writable open recover this dir?", kept in
        ``recovery_pending``: asked when the reader opens the dir and again before it reloads a
        partition another process changed, as writers come and go. It waits at the gate while a
        writer holds it (deciding whether it is first, or recovering), then asks holding the gate
        exclusively, for a moment: so neither a writer nor another reader can be at the session
        lock meanwhile. Never called with a partition lock held, which a recovering writer needs.
        Without a gate, no writer of this engine has opened the dir since the gate was introduced
        (a broker's dir, say), and the files alone answer, unless a gate appeared meanwhile."""
        while True:
            try:
                gate = open_nofollow(self.path / RECOVERY_GATE, os.O_RDONLY)
            except FileNotFoundError:
                pending = not self._closed_cleanly()
                if not (self.path / RECOVERY_GATE).exists():
                    self.recovery_pending = pending
                    return
                continue  # a writer arrived between the two looks: ask at its gate
            try:
                fcntl.flock(gate, fcntl.LOCK_EX)
                self.recovery_pending = not self._writer_live() and not self._closed_cleanly()
                return
            finally:
                os.close(gate)  # releases the flock

    def _closed_cleanly(self) -> bool:
        """The marker is there and no session file was left behind: what a first writer reads."""
        return (self.path / CLEAN_SHUTDOWN_FILE).exists() and not self._session_files()

    def _writer_live(self) -> bool:
        """Whether a writer has the dir open (it recovered the dir when it opened it), asked of the
        session lock by an exclusive ``flock`` taken and given back at once, which fails while any
        writer holds its shared one. Called at the gate, before the marker is read, so a last
        writer closing cannot write the marker between the two looks unseen. Where the lock
        cannot be taken at all (NFS refuses an exclusive lock on a file this process may only
        open read-only) a writer is assumed: the view shows the log as it is."""
        try:
            fd = open_nofollow(self.path / SESSION_LOCK, os.O_RDWR)
        except FileNotFoundError:
            return False
        except OSError as exc:  # not ours to write, or a read-only mount
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            fd = open_nofollow(self.path / SESSION_LOCK, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a writer holds it (EAGAIN), or no exclusive lock here (EBADF, ENOLCK)
            return True
        finally:
            os.close(fd)  # releases the flock if it was taken
        return False

    def _open_gate(self) -> None:
        """Let readers and other writers past the gate."""
        if self._gate_fd is not None:
            os.close(self._gate_fd)  # releases the flock
            self._gate_fd = None

    def finish_startup(self) -> None:
        """Called by the first writer after recovering: let other processes in."""
        if self._fd is not None and self.first_opener:
            fcntl.flock(self._fd, fcntl.LOCK_SH)
        self._open_gate()

    def record_load_failure(self, partition: tuple[str, int] | None = None) -> None:
        """A partition of this dir (None: the dir's scan) failed to load or recover in this
        process, or failed to undo a failed write (``LogAppender._undo``), so the process cannot vouch
        for the dir: Kafka writes the marker only for dirs that had a clean shutdown or whose
        logs all finished loading (``LogManager.shutdown``, ``loadLogsCompletedFlags``).
        ``close_session`` then leaves the session file behind, as a process that died does: no
        later closer writes the marker, and the next first opener recovers every partition."""
        self._load_failures.add(partition)

    def forget_load_failure(self, partition: tuple[str, int]) -> None:
        """A partition whose failed open is undone with everything its change made (a refused
        ``topic create``, say): it no longer stands between this process and the marker."""
        self._load_failures.discard(partition)

    def _session_files(self) -> list[Path]:
        with os.scandir(self.path) as it:
            return [Path(e.path) for e in it if SESSION_FILE.fullmatch(e.name) and not e.is_dir(follow_symlinks=False)]

    def _write_marker(self) -> None:
        """The last writer's marker; a refusal (a full disk, say) is a
        :class:`CleanShutdownMarkerError`: the next first writer recovers, which is safe."""
        try:
            write_clean_shutdown_marker(self.path)
        except OSError as exc:
            raise CleanShutdownMarkerError(
                f"could not write the clean-shutdown marker in {self.path} ({exc.strerror}: {exc.filename}); "
                "everything was committed, the next writable open recovers the log dir") from None

    def close_session(self) -> None:
        """Leave the session; the last process out writes the clean-shutdown marker, unless a
        partition failed to load here (``record_load_failure``)."""
        self._open_gate()  # a writer whose startup failed part way
        if self._fd is None:
            return
        if self._session_file is not None and not self._load_failures:
            self._session_file.unlink(missing_ok=True)
        self._session_file = None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not self._session_files():
                self._write_marker()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        finally:  # the session lock goes whatever happened, or a long-lived process kept it
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
