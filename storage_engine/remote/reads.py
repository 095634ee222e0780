"""Reading a tiered partition as one log: remote segments, then the local log from the tier's end
(Kafka's ``RemoteLogManager`` read path behind ``UnifiedLog``).

The logical log of a partition whose topic has ``remote.storage.enable`` is the remote tier of a
:class:`~.version.PartitionVersion` (offsets ``[log_start_offset, end_offset)``) followed by the
local log from ``end_offset``: local segments below it are copies shadowed by the remote tier
(remote compaction changes the remote copy only), so every read takes offsets below the tier's
end from the bucket. The log start offset is the version's, the log end offset the local log's.
Kafka's *local* log start offset is the local log's own.

A remote segment is read with the record layer's own batch reader (``read_batches_by``) over
ranged GETs of its ``.log`` object, from the position its ``.index`` object gives for a start
offset inside it, with every batch's CRC verified (the bytes crossed a network) and its offsets
checked against the segment's range. A segment object that is gone (swept) or shorter than its
recorded size is a one-line :class:`~.errors.RemoteStorageError` naming the object. Offsets are
checked across segments and across the tier boundary by the local log's own rule
(``log.reads.offset_order_error``): they never go backwards, and vanish only where a cleaner
may have been.

``--as-of-version N`` reads version N's remote tier alone: the local log's newer offsets are no
part of what that version holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError, LogGapError, OffsetOutOfRangeError
from ..index import OffsetIndex, TimeIndex
from ..log.isolation import FetchIsolation, committed_batches, fetch_isolation
from ..log.reads import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, offset_order_error
from ..log.segment_time import first_record_at
from ..record import RawBatch, Record, decode_batch, verify_batch
from ..record.file_records import read_batches_by
from .access import remote_partition
from .errors import RemoteMetadataError, RemoteStorageError
from .partition import RemotePartition
from .store import ObjectMissingError, ObjectStore
from .version import PartitionVersion, RemoteSegment

if TYPE_CHECKING:
    from ..log.log import Log

#: Bytes per ranged GET of a segment object (a larger batch grows it, as local reads do).
READ_CHUNK = 8 << 20


def object_url(rp: RemotePartition, name: str) -> str:
    """Where an object of ``rp`` is, as errors and dumps name it."""
    return f"{rp.store.url}/{rp.name(name)}"


def _get(rp: RemotePartition, name: str) -> bytes:
    try:
        return rp.read(name)
    except ObjectMissingError:
        raise ObjectMissingError(f"{object_url(rp, name)}: gone from the remote tier (swept?) though the "
                                 "version read names it") from None


def _ranged_reader(rp: RemotePartition, segment: RemoteSegment):
    """``read(size, position)`` of the segment's ``.log`` object, refusing a short answer."""
    url = object_url(rp, segment.log)

    def short(actual: int) -> RemoteStorageError:
        return RemoteStorageError(f"{url}: {actual} bytes, shorter than its recorded size {segment.size_bytes}")

    def read(size: int, position: int) -> bytes:
        try:
            data = rp.read_range(segment.log, position, position + size)
        except ObjectMissingError:
            raise ObjectMissingError(f"{url}: gone from the remote tier (swept?) though the version read "
                                     "names it") from None
        except RemoteStorageError:  # a range past a shortened object's end: say so, if that is why
            try:
                actual = rp.store.head(rp.name(segment.log)).size
            except RemoteStorageError:
                actual = segment.size_bytes
            if actual < segment.size_bytes:
                raise short(actual) from None
            raise
        if len(data) < size:
            raise short(position + len(data))
        return data

    return read


def _start_position(rp: RemotePartition, segment: RemoteSegment, start_offset: int) -> int:
    """The byte position to read ``segment`` from for ``start_offset``: its ``.index`` object's
    floor entry, as ``LogSegment.translate_offset`` uses the local file's."""
    if start_offset <= segment.base_offset:
        return 0
    url = object_url(rp, segment.index)
    position = OffsetIndex.from_bytes(_get(rp, segment.index), url, segment.base_offset).lookup(start_offset).position
    if not 0 <= position < segment.size_bytes:
        raise RemoteStorageError(f"{url}: points at position {position}, outside the segment's "
                                 f"{segment.size_bytes} bytes")
    return position


def remote_segment_batches(rp: RemotePartition, segment: RemoteSegment, start_offset: int | None = None, *,
                           verify: bool = True) -> Iterator[RawBatch]:
    """The batches of one remote segment, from the one holding ``start_offset`` (default: all),
    read without any local log (a Spark executor calls this). ``verify``: check each batch's
    CRC (``dump`` shows a damaged batch instead). Batches are views into the chunk they were
    read in: copy ``raw.data`` to keep one. Raises ``RemoteStorageError`` for an object gone or
    short, ``CorruptRecordError`` for a batch outside the segment's offsets or bytes after the
    last complete batch."""
    url = object_url(rp, segment.log)
    position = _start_position(rp, segment, start_offset) if start_offset is not None else 0
    end = position
    for raw, _, _ in read_batches_by(_ranged_reader(rp, segment), end=segment.size_bytes, start=position,
                                     chunk=READ_CHUNK, path=url):
        header = raw.header
        if verify:
            verify_batch(raw, path=url)
        if header.base_offset < segment.base_offset or header.last_offset >= segment.end_offset:
            raise CorruptRecordError(f"batch offsets {header.base_offset}..{header.last_offset} are outside the "
                                     f"segment's [{segment.base_offset}, {segment.end_offset})", path=url,
                                     position=raw.position, offset=header.base_offset)
        end = raw.position + header.size_in_bytes
        if start_offset is None or header.last_offset >= start_offset:
            yield raw
    if end != segment.size_bytes:
        raise CorruptRecordError(f"{segment.size_bytes - end} bytes after the last complete batch", path=url,
                                 position=end)


def remote_offset_for_timestamp(rp: RemotePartition, segment: RemoteSegment, timestamp: int,
                                starting_offset: int) -> tuple[int, int] | None:
    """(timestamp, offset) of the segment's first record at or after ``timestamp`` and
    ``starting_offset``: its ``.timeindex`` object's floor entry, then the batches from there
    (``LogSegment.findOffsetByTimestamp``)."""
    url = object_url(rp, segment.time_index)
    entry = TimeIndex.from_bytes(_get(rp, segment.time_index), url, segment.base_offset).lookup(timestamp)
    batches = remote_segment_batches(rp, segment, max(entry.offset, starting_offset))
    return first_record_at(batches, timestamp, starting_offset, object_url(rp, segment.log))


@dataclass(frozen=True)
class TieredLog:
    """One read view of a partition across its tiers (see the module docstring). ``local``:
    the local log, None where there is none (a Spark executor, or an ``--as-of-version``
    read); ``version``: the remote tier read, None when nothing is remote."""

    topic: str
    partition: int
    local: Log | None
    remote: RemotePartition | None
    version: PartitionVersion | None
    compact: bool  # the topic's cleanup.policy has compact: offsets may vanish anywhere

    @property
    def tier_end(self) -> int | None:
        """The remote tier's end: offsets below it are read from the bucket."""
        return self.version.end_offset if self.version is not None else None

    @property
    def log_start_offset(self) -> int:
        if self.version is not None:
            return self.version.log_start_offset
        assert self.local is not None
        return self.local.log_start_offset

    @property
    def log_end_offset(self) -> int:
        if self.local is not None:
            return self.local.log_end_offset
        assert self.version is not None
        return self.version.end_offset

    @property
    def local_log_start_offset(self) -> int | None:
        """Kafka's local log start offset (None: no local log read)."""
        return self.local.log_start_offset if self.local is not None else None

    def refresh(self) -> None:
        if self.local is not None:
            self.local.refresh()

    def may_be_cleaned(self, expected: int) -> bool:
        """Whether offsets from ``expected`` may have been removed by a cleaner (then a gap is no
        loss): a compacted topic, or below the remote tier's cleaner checkpoint."""
        checkpoint = self.version.cleaner_checkpoint if self.version is not None else None
        return self.compact or (checkpoint is not None and expected < checkpoint)

    def segment_path(self, offset: int) -> str:
        """Where ``offset`` is read from: a remote ``.log`` object, or a local segment file."""
        if self.version is not None and self.remote is not None and offset < self.version.end_offset:
            for seg in self.version.segments:
                if offset < seg.end_offset:
                    return object_url(self.remote, seg.log)
        assert self.local is not None
        return self.local.segment_path(offset)

    def batches_from(self, offset: int) -> Iterator[RawBatch]:
        """Every batch holding offsets at or after ``offset``, to the log end offset: the remote
        segments', then the local log's from the tier's end."""
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.topic}-{self.partition}, but we only "
                f"have log segments in the range {self.log_start_offset} to {self.log_end_offset}.")
        expected, first = offset, True
        end = self.tier_end
        if self.version is not None and self.remote is not None and end is not None and offset < end:
            for seg in self.version.segments:
                if seg.end_offset <= offset:
                    continue
                url = object_url(self.remote, seg.log)
                for raw in remote_segment_batches(self.remote, seg, offset if first else None):
                    problem = offset_order_error(expected, raw.header.base_offset, f"{url} at position {raw.position}",
                                                 first=first, cleaned=self.may_be_cleaned(expected))
                    if problem:
                        raise problem
                    first, expected = False, raw.header.next_offset
                    yield raw
            problem = offset_order_error(expected, end, f"{object_url(self.remote, self.version.segments[-1].log)} "
                                         "after its last batch", first=first, cleaned=self.may_be_cleaned(expected))
            if problem:  # offsets lost at the remote tier's end
                raise problem
            first, expected = False, end
        if self.local is None or offset >= self.log_end_offset:
            return
        start = offset if end is None else max(offset, end)
        if start < self.local.log_start_offset:
            raise LogGapError(f"{self.topic}-{self.partition}: offsets {start} to {self.local.log_start_offset - 1} "
                              f"are in neither tier (the remote tier ends at {end}, the local log starts at "
                              f"{self.local.log_start_offset})")
        crossing = not first  # the read came through the remote tier: check its step to the local log
        for raw in self.local.iter_batches(start):
            if crossing:  # the local log checks its own order after it
                problem = offset_order_error(expected, raw.header.base_offset,
                                             f"{self.local.segment_path(raw.header.base_offset)} at position "
                                             f"{raw.position}, after the remote tier's end",
                                             first=False, cleaned=self.may_be_cleaned(expected))
                if problem:
                    raise problem
                crossing = False
            yield raw

    def last_stable_offset(self) -> int:
        """The local log's (tiering copies nothing at or above it, so the remote tier alone,
        an ``--as-of-version`` read, is stable to its end)."""
        return self.local.last_stable_offset() if self.local is not None else self.log_end_offset

    def records_from(self, offset: int, *, include_control: bool = False,
                     isolation_level: str | FetchIsolation = FetchIsolation.READ_UNCOMMITTED) -> Iterator[Record]:
        """Records at or after ``offset`` to the log end offset (``read_committed``: to the last
        stable offset, aborted transactions left out), decoded (CRC checked) as read: those
        before a damaged batch come out before its error."""
        batches = self.batches_from(offset)
        if fetch_isolation(isolation_level) is FetchIsolation.READ_COMMITTED:
            batches = committed_batches(batches, self.last_stable_offset(), self.segment_path)
        for raw in batches:
            if raw.header.is_control and not include_control:
                continue
            for record in decode_batch(raw, path=self.segment_path(raw.header.base_offset)):
                if record.offset >= offset:
                    yield record

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) as ListOffsets answers it across the tiers (-2 earliest, -1 latest,
        -3 max timestamp), as Kafka's ``UnifiedLog.fetchOffsetByTimestamp`` asks the remote tier
        first."""
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, self.log_start_offset
        if timestamp == LATEST_TIMESTAMP:
            return -1, self.log_end_offset
        remote = self.version.segments if self.version is not None and self.remote is not None else ()
        remote = tuple(s for s in remote if s.end_offset > self.log_start_offset)
        local_from = self.tier_end
        if timestamp == MAX_TIMESTAMP:
            local = (self.local.offset_for_timestamp(MAX_TIMESTAMP, from_offset=local_from)
                     if self.local is not None and self.log_end_offset > (local_from or 0) else None)
            best = max(remote, key=lambda s: s.max_timestamp, default=None)
            if best is None or best.max_timestamp < 0 or (local is not None and local[0] > best.max_timestamp):
                return local
            assert self.remote is not None
            return remote_offset_for_timestamp(self.remote, best, best.max_timestamp, self.log_start_offset)
        for seg in remote:
            if seg.max_timestamp >= timestamp:
                assert self.remote is not None
                found = remote_offset_for_timestamp(self.remote, seg, timestamp, self.log_start_offset)
                if found is not None:
                    return found
        if self.local is None or self.log_end_offset <= (local_from or 0):
            return None
        return self.local.offset_for_timestamp(timestamp, from_offset=local_from)


def tiered_log(local: Log, *, as_of_version: int | None = None, store: ObjectStore | None = None) -> TieredLog:
    """The read view of ``local``'s partition: across the tiers when its topic has
    ``remote.storage.enable`` (the latest version, or ``as_of_version`` alone), else the local
    log. ``store``: the remote tier's (default: ``LOGPLAT_REMOTE_STORAGE``'s; a Spark task
    passes the one its driver resolved). Raises ``RemoteStorageError`` for a version that
    cannot be read."""
    config = local.config
    if not config.remote_storage_enable:
        if as_of_version is not None:
            raise RemoteStorageError(f"topic {local.topic} has remote.storage.enable=false: it has no remote "
                                     "versions to read")
        return TieredLog(local.topic, local.partition, local, None, None, config.compact)
    rp = remote_partition(local.topic, local.partition, config, store, directory=local.dir)
    if as_of_version is not None:
        return TieredLog(local.topic, local.partition, None, rp, rp.read_version(as_of_version), config.compact)
    latest = rp.latest()
    if latest is not None:
        check_tiers_meet(local, latest)
    return TieredLog(local.topic, local.partition, local, rp, latest, config.compact)


def check_tiers_meet(local: Log, version: PartitionVersion) -> None:
    """Refuse a remote version and a local log that do not make one log: the tier ending past
    the local log end (a read would skip the local records), or the local log starting past the
    tier's end (offsets in neither tier). Every reader of a partition's two tiers (``consume``,
    ``verify``, the checks, the data source's plan) asks this before reading."""
    if version.end_offset > local.log_end_offset:
        raise RemoteMetadataError(
            f"{local.tp}: the remote tier's version {version.version} ends at offset {version.end_offset}, past the "
            f"local log end offset {local.log_end_offset}: the tiers do not fit together (run logctl verify)")
    if local.log_start_offset > version.end_offset:
        raise LogGapError(f"{local.tp}: offsets {version.end_offset} to {local.log_start_offset - 1} are in neither "
                          f"tier (the remote tier ends at {version.end_offset}, the local log starts at "
                          f"{local.log_start_offset})")
