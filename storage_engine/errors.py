"""Exceptions raised by the storage engine.

Every error the engine raises is a ``LogError`` so callers (the CLI, Spark jobs, Dagster
assets) can catch one class and print its message. Each message names what was wrong and
where: the file, the byte position and the offset for corrupt data; the key, the value and
what is allowed for configuration.
"""

from __future__ import annotations

import errno


class LogError(Exception):
    """Base class of every error the storage engine raises on purpose."""


def shown_value(value: object) -> str:
    """A value a user gave, as an error message quotes it (``repr``): a pasted blob or a
    5000-digit number is cut to its start, which is enough to find it, and its length."""
    shown = repr(value)
    return shown if len(shown) <= 400 else f"{shown[:60]}... ({len(str(value))} characters)"


class CorruptRecordError(LogError):
    """Bytes on disk (or handed to ``append``) are not a valid record batch.

    Carries where the problem is so the message is actionable: the file, the byte position
    of the batch inside it, and the batch's base offset when it could be read.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        position: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.position = position
        self.offset = offset
        where = []
        if path is not None:
            where.append(f"file {path}")
        if position is not None:
            where.append(f"position {position}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)


class UnknownCompressionError(CorruptRecordError):
    """A batch's attributes name a codec id outside 0..4."""


class InvalidRecordError(LogError):
    """A record is well formed but not acceptable here (for example a null key on a compacted topic)."""


class InvalidTimestampError(InvalidRecordError):
    """A record's timestamp is outside ``message.timestamp.before.max.ms`` /
    ``message.timestamp.after.max.ms`` of the clock (Kafka's ``InvalidTimestampException``)."""


class LogDirsCordonedError(LogError):
    """Every log dir is in ``cordoned.log.dirs`` (KIP-1066): a new partition has nowhere to go."""


class RecordTooLargeError(LogError):
    """A batch exceeds ``max.message.bytes`` or ``segment.bytes``."""


class ConfigError(LogError):
    """A configuration value is outside what Kafka allows; nothing was changed."""

    def __init__(self, key: str, value: object, allowed: str, *, message: str | None = None) -> None:
        """``message``: Kafka's whole text where it is not "Invalid value ... for configuration"."""
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(message or f"Invalid value {shown_value(value)} for configuration {key}: {allowed}")


class UnknownConfigError(LogError):
    """A config name to delete that no topic has (a typo): there is no value to name, only the key."""


class EnvironmentValueError(LogError):
    """A ``LOGPLAT_*`` variable holds a value the engine would refuse; the message names the
    variable and the value."""


class ServerPropertiesError(LogError):
    """The broker properties file named by ``LOGPLAT_SERVER_PROPERTIES`` cannot be read as one."""


class InvalidTopicError(LogError):
    """A topic name breaks Kafka's naming rules, or a partition number is out of range."""


class InvalidPartitionsError(LogError):
    """A partition count a topic cannot be altered to (Kafka's ``InvalidPartitionsException``):
    not above its current count, or above the limit."""


class TopicExistsError(LogError):
    """``create`` was asked for a topic that already has a directory."""


class UnknownTopicOrPartitionError(LogError):
    """The topic or partition has no directory in any log dir."""


class OffsetOutOfRangeError(LogError):
    """A read, a delete-records or a truncation asked for an offset the log does not hold."""


class InvalidSegmentNameError(LogError):
    """A file in a partition directory is named like a segment file, but not with a base offset
    Kafka can have (other than 20 digits, or above Long.MAX_VALUE); the load refuses before it
    writes anything."""


class NotALogDirError(LogError):
    """A directory given as a log dir holds segment files: it is a partition directory, not a
    directory of partitions; nothing was written in it."""


class OffsetOverflowError(LogError):
    """An append would assign an offset whose next offset passes Long.MAX_VALUE (Kafka's
    offsets are longs); nothing was appended."""


class CorruptIndexError(LogError):
    """An index file fails its sanity check; the loader rebuilds it from the log."""


class IndexSizeError(LogError):
    """An index file could not be given its preallocated length (``segment.index.bytes``): a
    file size limit below it, or a full disk on a filesystem that allocates."""


class CleanShutdownMarkerError(LogError):
    """Only the clean-shutdown marker (Kafka's ``.kafka_cleanshutdown``) could not be written
    when a log dir closed: every change was already committed, and the next writable open
    recovers the dir as after an unclean shutdown, which is safe. A warning, not a failure."""


class CheckpointError(LogError):
    """A checkpoint file cannot be parsed; the message names the file and the bad line."""


class LogChangedError(LogError):
    """The segment list changed underneath an operation that planned against an older one.

    Raised by optimistic operations (compaction commits, retention applies) when the segments
    they fingerprinted are no longer the ones on disk; the caller re-plans or skips.
    """


class PartitionReplacedError(LogChangedError):
    """The partition directory a process loaded was deleted or renamed (a topic delete), and its
    path may name a new topic's directory now (a create under the same name): the process
    writes nothing there. Kafka's ``LocalLog`` never meets this, its broker owns the directory."""


class UnsafePathError(LogError):
    """A path under a log dir is a symbolic link or resolves outside the log dir; nothing was followed."""


class NotRegularFileError(LogError):
    """A path under a log dir is not of the kind the engine expects there: a FIFO, a socket, a
    device or a directory where a file belongs, or a file where a directory belongs (the topic
    metadata folder); it was refused before a byte was read or written."""


class AppendFailedError(LogError):
    """A produce call failed part way (a full disk, a file size limit, a read-only directory);
    everything it had written was undone, so none of its records is in the log."""


class CompactionWriteError(LogError):
    """A cleaner could not write its replacement segment (a full disk, a file size limit): its
    staged output was removed and nothing was swapped."""


#: what a write refused for want of room says: out of space or quota, or past a file size limit
WRITE_REFUSED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def write_failure(tp: str, exc: OSError, path: object) -> str:
    """A failed write, named the same way by produce and compaction: the partition, the file
    (the one the error names, else the one being written) and the system's reason."""
    return f"{tp}: writing {exc.filename or path} failed ({exc.strerror or exc})"


class UndoFailedError(LogError):
    """A failed write whose undo failed too: the files may hold part of it, so the log takes no
    more writes in this process, and the log dir is left for recovery, as after a crash."""


class NeedsRecoveryError(LogError):
    """A read-only view refused: the files are not what the next writable open would leave
    (an interrupted swap); the message says what that open would do."""


class LogDirsNotGivenError(LogError):
    """A topic was placed over a log dir that is not given: a partition directory missing from
    those given may be there, so none is made, and a reader says so."""


class LogGapError(LogError):
    """Offsets missing between two segments of a log that is not compacted (a lost segment)."""


class InvalidProducerEpochError(InvalidRecordError):
    """A producer's batch or transaction marker carries an epoch below the last one the partition
    saw for it (Kafka's ``InvalidProducerEpochException``, ``ProducerAppendInfo.checkProducerEpoch``)."""


class TransactionCoordinatorFencedError(InvalidRecordError):
    """A transaction marker from a coordinator epoch below the producer's current one: a zombie
    coordinator (Kafka's ``TransactionCoordinatorFencedException``)."""
