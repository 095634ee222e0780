"""Kafka's per-log-directory checkpoint files and the clean-shutdown marker.

A checkpoint file maps topic-partitions to an offset (recovery point, log start offset, cleaner
position, high watermark) in Kafka's text format::

    0                  version
    2                  number of entries
    my-topic 0 1234    "<topic> <partition> <offset>"
    other 3 0

Kafka writes it to ``<file>.tmp``, fsyncs, renames over the file and fsyncs the directory, so a
crash leaves either the old or the new content, never a mix. We do the same, and because several
processes (writers, cleaners, Spark executors) may update one file, ``CheckpointFile.update``
serialises the read-merge-write under a directory-wide ``flock``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import CheckpointError, InvalidTopicError
from ..files.durable import atomic_write, fsync_dir
from ..files.naming import validate_topic_name
from ..files.nofollow import open_nofollow, read_bytes_nofollow
from ..limits import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".logplat-checkpoints.lock"

CURRENT_VERSION = 0

TopicPartition = tuple[str, int]

_INTEGER = re.compile(r"[+-]?[0-9]+")


def _parse_int(text: str, lo: int, hi: int) -> int | None:
    if not _INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def parse_checkpoint(data: bytes, path: Path | str = "<memory>") -> dict[TopicPartition, int]:
    """Parse checkpoint bytes with Kafka's rules; errors name the file and the offending line.

    A line whose topic name is not a legal one (``../../etc 0 5``) is malformed here, a
    deliberate difference: Kafka's reader builds a ``TopicPartition`` from any text. Accepted at
    read time, it was only refused when the file was rewritten, after the command had
    appended, swapped or renamed on its strength.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"Checkpoint file {path} is not UTF-8: {exc}") from None
    if text == "":
        return {}
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]

    version = _parse_int(lines[0].strip(), INT_MIN, INT_MAX)
    if version is None:
        raise CheckpointError(
            f"Malformed version line in checkpoint file {path}: {lines[0]!r}"
        )
    if version != CURRENT_VERSION:
        raise CheckpointError(
            f"Unrecognised version:{version}, expected version: {CURRENT_VERSION} "
            f"in checkpoint file at: {path}"
        )
    if len(lines) < 2:
        return {}
    expected = _parse_int(lines[1].strip(), 0, INT_MAX)
    if expected is None:
        raise CheckpointError(f"Malformed entry count in checkpoint file {path}: {lines[1]!r}")

    entries: dict[TopicPartition, int] = {}
    topics: set[str] = set()  # names already validated: a topic has a line per partition
    body = lines[2:]
    for number, line in enumerate(body, start=3):
        parts = line.split()
        partition = _parse_int(parts[1], INT_MIN, INT_MAX) if len(parts) == 3 else None
        offset = _parse_int(parts[2], LONG_MIN, LONG_MAX) if len(parts) == 3 else None
        if partition is None or offset is None:
            raise CheckpointError(f"Malformed line {number} in checkpoint file {path}: {line!r}")
        if parts[0] not in topics:
            try:
                validate_topic_name(parts[0])
            except InvalidTopicError as exc:
                raise CheckpointError(f"Malformed line {number} in checkpoint file {path}: {exc}") from None
            topics.add(parts[0])
        entries[(parts[0], partition)] = offset
    if len(body) != expected:
        raise CheckpointError(
            f"Expected {expected} entries in checkpoint file {path}, but found {len(body)}"
        )
    return entries


def _checkpoint_bytes(path: Path) -> bytes:
    """A checkpoint file's bytes; a missing file reads as an empty one (it holds no entries)."""
    try:
        return read_bytes_nofollow(path)
    except FileNotFoundError:
        return b""


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The entries of a checkpoint file; a missing or empty file holds none."""
    return parse_checkpoint(_checkpoint_bytes(path), path)


def format_checkpoint(entries: Mapping[TopicPartition, int]) -> bytes:
    """Kafka's text format, sorted by (topic, partition) so equal content gives equal bytes.
    Nothing is written that ``parse_checkpoint`` would refuse to read back."""
    for topic in {topic for topic, _ in entries}:
        validate_topic_name(topic)  # a space or newline in a name would corrupt the file
    lines = [str(CURRENT_VERSION), str(len(entries))]
    for (topic, partition), offset in sorted(entries.items()):
        if not (INT_MIN <= int(partition) <= INT_MAX and LONG_MIN <= int(offset) <= LONG_MAX):
            raise CheckpointError(f"cannot checkpoint offset {offset} of {topic}-{partition}: outside Kafka's ranges")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> bytes:
    """Atomically replace the checkpoint file with ``entries``; returns the bytes written."""
    data = format_checkpoint(entries)
    atomic_write(Path(path), data)
    return data


class CheckpointFile:
    """One checkpoint file of a log dir, with a read-modify-write that is safe across processes.

    ``update()`` holds an exclusive ``fcntl.flock`` on ``<log dir>/.logplat-checkpoints.lock``
    while it reads, merges and atomically rewrites, so two processes updating different
    partitions both keep their entries. Readers need no lock: renames are atomic. Unlike
    Kafka, constructing one does not create the file, so read-only tools leave a copied
    broker directory untouched.

    Every read takes the file's bytes afresh (another process may have rewritten it), but
    parses them only when they differ from the bytes it last parsed or wrote: opening or
    trimming each of N partitions of a log dir reads its checkpoints N times, and parsing N
    entries each time made that quadratic (41 s of retention over 2,000 partitions).
    """

    def __init__(self, log_dir: Path, name: str) -> None:
        self.log_dir = Path(log_dir)
        self.name = name
        self.path = self.log_dir / name
        self._parsed: tuple[bytes, dict[TopicPartition, int]] = (b"", {})

    def __repr__(self) -> str:
        return f"CheckpointFile({str(self.path)!r})"

    def read(self) -> dict[TopicPartition, int]:
        data = _checkpoint_bytes(self.path)
        parsed_data, entries = self._parsed
        if data != parsed_data:
            entries = parse_checkpoint(data, self.path)
            self._parsed = (data, entries)
        return dict(entries)

    def get(self, tp: TopicPartition) -> int | None:
        return self.read().get(tp)

    def update(
        self,
        set_entries: Mapping[TopicPartition, int] = {},
        remove: Iterable[TopicPartition] = (),
    ) -> dict[TopicPartition, int]:
        """Set and remove entries under the directory lock; returns the new content.

        A corrupt existing file raises ``CheckpointError`` rather than being overwritten: the
        caller decides whether losing its other entries is acceptable.
        """
        removals = list(remove)
        with self._locked():
            current = self.read()
            new = dict(current)
            for tp in removals:
                new.pop(tp, None)
            new.update(set_entries)
            if new != current or not self.path.exists():
                self._write(new)
            return new

    def write(self, entries: Mapping[TopicPartition, int]) -> None:
        """Replace the whole content under the directory lock."""
        with self._locked():
            self._write(entries)

    def _write(self, entries: Mapping[TopicPartition, int]) -> None:
        self._parsed = (write_checkpoint(self.path, entries), dict(entries))

    def _locked(self) -> _DirLock:
        return _DirLock(self.log_dir / LOCK_FILE)


class _DirLock:
    """An exclusive ``flock`` held for the duration of a ``with`` block."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1

    def __enter__(self) -> _DirLock:
        self._fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = -1


def write_clean_shutdown_marker(log_dir: Path, broker_epoch: int = 0) -> None:
    """Write ``.kafka_cleanshutdown`` (``{"version":0,"brokerEpoch":N}``) durably."""
    body = json.dumps({"version": 0, "brokerEpoch": int(broker_epoch)}, separators=(",", ":"))
    atomic_write(Path(log_dir) / CLEAN_SHUTDOWN_FILE, body.encode("utf-8"))


def consume_clean_shutdown_marker(log_dir: Path) -> bool:
    """True if the last shutdown was clean; the marker is deleted at once (KAFKA-10471).

    Deleting before loading means a crash during loading is seen as unclean next time.
    Older brokers wrote an empty marker; presence is what counts.
    """
    marker = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    try:
        marker.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(Path(log_dir))
    return True
