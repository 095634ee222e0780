"""The ``kafka-log`` PySpark data source: Kafka log directories read as Spark's Kafka source reads a topic.

``spark.read.format("kafka-log").load("/data/logs")`` (several log dirs comma-separated, as in
``LOGPLAT_LOG_DIRS``) returns the schema of Spark's built-in Kafka source (:func:`source_schema`:
the ``headers`` column only with ``includeHeaders=true``, as there), so jobs written against a
broker run unchanged against files at rest.

Spark 4 finds Python data sources by itself: its lookup (``pyspark.sql.worker.lookup_data_sources``)
imports every top-level module on the Python path named ``pyspark_*`` and registers its
``DefaultSource``; :mod:`pyspark_kafka_log` is that module for this class, so a plain
``SparkSession`` reads ``format("kafka-log")`` with no ``registerDataSource`` call.

Planning and reading are split the way the engine splits writers and readers:

* the driver (``partitions()``) opens the log dirs through a read-only ``LogManager``, exactly as
  ``logctl consume`` does, so the live segment set and the log start offset are the engine's
  own answer (leftover ``.deleted``/``.cleaned``/``.swap``/``.cleaning`` files are not segments;
  records below the ``log-start-offset-checkpoint`` are logically deleted). It snapshots every
  segment as (file, inode, byte range, offset range) and cuts large segments at batch
  boundaries, so the plan is a pure description that any executor can carry out;
* executors (``read()``) open one segment file read-only (no partition lock, no ``Log``: a reader
  must never write), scan the complete batches of their byte range, decode them with the
  engine's columnar decoder and yield Arrow record batches already in Spark's exact Arrow
  layout, so no row ever passes through Python objects.

Because each split reads only up to the byte position and offset fixed at planning time, a
query sees one consistent snapshot even while producers append. A segment that retention or
the cleaner renamed to ``.deleted`` after planning is still read under that name (Kafka keeps
such files for ``file.delete.delay.ms`` precisely for in-flight readers).

A topic with ``remote.storage.enable`` is read as one log across its tiers: one split per
segment of its remote tier's latest version, which the executor fetches from the bucket itself
(``spark_jobs.remote_tier``: no log dir, no environment needed there), then the local splits from
the tier's end.

The options and their strict checks live in :mod:`spark_jobs.datasource_options`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from storage_engine.config.topic import LogConfig
from storage_engine.errors import CorruptRecordError
from storage_engine.files.naming import DELETED_SUFFIX
from storage_engine.log.log import Log
from storage_engine.log.segment import LogSegment
from storage_engine.logdir.manager import LogManager, PartitionLocation
from storage_engine.record import RawBatch, verify_batch
from storage_engine.record.columnar import batches_to_arrow
from storage_engine.remote.location import RemoteLocation
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.reads import check_tiers_meet, object_url, remote_segment_batches
from storage_engine.remote.store import ObjectMissingError
from storage_engine.remote.version import PartitionVersion, RemoteSegment

from .datasource_options import ReadOptions, TopicPartition, option_error
from .errors import DataSourceOptionError, SparkJobError
from .remote_tier import executor_partition, job_location, tiered_offset_for_timestamp

__all__ = [
    "KAFKA_SOURCE_SCHEMA",
    "KAFKA_ARROW_SCHEMA",
    "arrow_schema",
    "source_schema",
    "KafkaLogDataSource",
    "KafkaLogReader",
    "ReadOptions",
    "SegmentSplit",
    "RemoteSegmentSplit",
    "SegmentChangedError",
    "plan_splits",
    "read_split",
]

SOURCE_NAME = "kafka-log"

#: Spark's built-in Kafka source schema (``KafkaRecordToRowConverter`` with headers): every field
#: is declared with ``StructField``'s default, i.e. nullable, and so is the header array.
KAFKA_SOURCE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)

#: What Spark's worker expects ``read()`` to yield, field for field: it compares the first batch
#: with ``to_arrow_schema(KAFKA_SOURCE_SCHEMA, timezone="UTC")`` and fails on any difference
#: (``large_binary``, int64 partitions, a non-UTC timestamp, a list item not named ``element``).
KAFKA_ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field(
            "headers",
            pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))),
        ),
    ]
)

_HEADERS = "headers"


def source_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, with ``headers`` only when ``includeHeaders`` is true (its default is false)."""
    if include_headers:
        return KAFKA_SOURCE_SCHEMA
    return StructType([f for f in KAFKA_SOURCE_SCHEMA.fields if f.name != _HEADERS])


def arrow_schema(include_headers: bool) -> pa.Schema:
    """:func:`source_schema` in the Arrow layout Spark's worker checks ``read()``'s batches against."""
    return KAFKA_ARROW_SCHEMA if include_headers else KAFKA_ARROW_SCHEMA.remove(KAFKA_ARROW_SCHEMA.get_field_index(_HEADERS))


#: Bounds of one yielded Arrow batch: Spark passes our batches through unchanged, and a regular
#: (32-bit offset) binary column must stay under 2 GiB.
MAX_BATCH_ROWS = 65_536
MAX_BATCH_BYTES = 64 << 20
#: Compressed bytes decoded at once; decoding expands them, so this stays well below the batch limit.
_DECODE_GROUP_BYTES = 8 << 20


class SegmentChangedError(SparkJobError):
    """A planned segment file is gone (past ``file.delete.delay.ms``) or was replaced, or an object
    of the remote version planned on was swept: re-run the query."""


# ---------------------------------------------------------------------- planning (driver)


@dataclass(frozen=True)
class SegmentSplit(InputPartition):
    """One byte range of one segment file: ``[start_position, end_position)`` holds whole batches.

    ``inode`` identifies the file planned, so an executor never reads a replacement that took
    its name (a compaction swap) by mistake. ``at_tail`` marks the last range of the active
    segment, the only one allowed to end in a torn, partial batch (a rolled segment's torn end
    is damage, which ``consume`` refuses too: no offset is skipped silently). ``include_headers``
    is the read's ``includeHeaders``: whether the rows carry the ``headers`` column.
    """

    topic: str
    partition: int
    directory: str
    base_offset: int
    inode: int
    start_position: int
    end_position: int
    min_offset: int
    max_offset: int
    at_tail: bool
    include_headers: bool


@dataclass(frozen=True)
class RemoteSegmentSplit(InputPartition):
    """One segment of a partition's remote tier, ``[min_offset, max_offset)`` of it read: the
    executor fetches the segment's object from ``location`` itself, so it needs no log dir.
    Its objects are immutable and outlive the version that named them by
    ``logplat.remote.version.retention.ms``, so a query reads the version it planned even if a
    compaction commits the next one meanwhile."""

    topic: str
    partition: int
    location: RemoteLocation
    segment: RemoteSegment
    min_offset: int
    max_offset: int
    include_headers: bool
    version: int  # the remote version planned on, which named ``segment``


Split = SegmentSplit | RemoteSegmentSplit


def _chosen_topics(known_topics: set[str], opts: ReadOptions) -> list[str]:
    """The topics read: ``topics``/``subscribe`` (each must exist), those ``subscribePattern``
    matches whole (none matching reads nothing, as Spark's Kafka source), ``assign``'s, or all."""
    if opts.topics is not None:
        unknown = [t for t in opts.topics if t not in known_topics]
        if unknown:
            raise option_error("topics", ",".join(opts.topics),
                               f"no topic {', '.join(unknown)} in {','.join(opts.log_dirs)}")
        return list(opts.topics)
    if opts.topic_pattern is not None:
        pattern = re.compile(opts.topic_pattern)
        return sorted(t for t in known_topics if pattern.fullmatch(t))
    if opts.assign is not None:
        return sorted({t for t, _ in opts.assign} & known_topics)
    return sorted(known_topics)


def _choose_partitions(opts: ReadOptions, topics: list[str], on_disk: list[TopicPartition]) -> list[TopicPartition]:
    """The topic-partitions to read, checking every name the options give explicitly."""
    if opts.topic_pattern is not None and not topics:
        return []  # a pattern matching no topic reads nothing, as Spark's Kafka source
    if opts.assign is not None:
        present = set(on_disk)
        missing = [tp for tp in opts.assign if tp not in present]
        if missing:
            topic, partition = missing[0]
            raise option_error("assign", f"{topic}-{partition}",
                               f"no partition {partition} of topic {topic} in {','.join(opts.log_dirs)}")
        chosen = sorted(opts.assign)
    else:
        chosen = [tp for tp in on_disk if tp[0] in topics and (opts.partitions is None or tp[1] in opts.partitions)]
    if opts.partitions is not None:
        present_numbers = {p for _, p in chosen}
        absent = [p for p in opts.partitions if p not in present_numbers]
        if absent:
            raise option_error(
                "partitions",
                ",".join(map(str, opts.partitions)),
                f"partition {absent[0]} exists in none of the topics read ({', '.join(topics)})",
            )
    chosen_set = set(chosen)
    for option, named in opts.per_partition_options():
        stray = sorted(tp for tp in named if tp not in chosen_set)
        if stray:
            topic, partition = stray[0]
            raise option_error(option, f"{topic}-{partition}",
                               "names a partition that is not among the partitions read")
    return chosen


def _offset_lookup(log: Log):
    """``Log.offset_for_timestamp`` (Kafka's ``ListOffsets`` by timestamp) as the offset alone."""
    def lookup(timestamp: int) -> int | None:
        found = log.offset_for_timestamp(timestamp)
        return None if found is None else found[1]
    return lookup


def _is_batch_start(seg: LogSegment, position: int, end: int) -> bool:
    """Whether a complete, CRC-valid batch starts at ``position``: an index entry is only
    trusted as a cut point after this, because a wrong cut would silently drop the batch it
    falls into (the split before it would see that batch as a torn tail)."""
    try:
        raw = next(seg.batches(position, end), None)
        if raw is None or raw.header.base_offset < seg.base_offset:
            return False
        verify_batch(raw, path=str(seg.log_path))
    except CorruptRecordError:
        return False
    return True


def _scanned_cut(seg: LogSegment, start: int, target: int, end: int) -> int | None:
    """The last batch start in ``(start, target]`` found by walking headers from ``start``, or
    the first one after ``start`` when a single batch is bigger than the split size."""
    cut = None
    for raw in seg.batches(start, end):
        if raw.position == start:
            continue
        if raw.position > target:
            return cut if cut is not None else raw.position
        cut = raw.position
    return cut


def _cut_points(seg: LogSegment, start: int, end: int, max_bytes: int) -> list[int]:
    """Batch-start positions cutting ``[start, end)`` into ranges of about ``max_bytes``.

    Candidates come from the sparse ``.index`` (one entry per ``index.interval.bytes``), each
    checked by :func:`_is_batch_start`; without a usable entry the batch headers are walked.
    """
    cuts = [start]
    positions: list[int] | None = None
    while end - cuts[-1] > max_bytes:
        target = cuts[-1] + max_bytes
        if positions is None:
            index = seg.offset_index
            positions = [index.entry(n).position for n in range(index.entries)]
        i = bisect_right(positions, target) - 1
        cut = positions[i] if i >= 0 and positions[i] > cuts[-1] else None
        if cut is None or not _is_batch_start(seg, cut, end):
            cut = _scanned_cut(seg, cuts[-1], target, end)
        if cut is None or cut >= end:
            break
        cuts.append(cut)
    return cuts + [end]


def _segment_byte_range(seg: LogSegment, lo: int, hi: int, next_base: int, size: int) -> tuple[int, int] | None:
    """Byte positions of the batches of ``seg`` holding offsets in ``[lo, hi)``, or None.

    Found through the offset index (``translate_offset``), so reading a small offset range of
    a large segment neither plans nor scans the rest of it.
    """
    start = 0
    if lo > seg.base_offset:
        first = seg.translate_offset(lo)
        if first is None:
            return None
        start = first.position
    end = size
    after = seg.translate_offset(hi) if hi < next_base else None
    if after is not None:
        # The batch holding ``hi`` may start below it (or be a legacy compressed wrapper whose
        # first offset is unknown): keep it, the decoder drops offsets >= hi.
        h = after.header
        starts_below = h.records_count < 0 or h.base_offset < hi
        end = after.position + h.size_in_bytes if starts_below else after.position
    return (start, end) if end > start else None


def _log_splits(log: Log, lo: int, hi: int, opts: ReadOptions) -> Iterator[SegmentSplit]:
    """The splits of one partition's segments that hold offsets in ``[lo, hi)``."""
    segments = log.segments
    for i, seg in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else hi
        if next_base <= lo:
            continue  # every offset of this segment is below the range
        if seg.base_offset >= hi:
            break
        size = seg.refresh_size()
        byte_range = _segment_byte_range(seg, lo, hi, next_base, size)
        if byte_range is None:
            continue
        cuts = _cut_points(seg, byte_range[0], byte_range[1], opts.max_bytes_per_split)
        active = i == len(segments) - 1  # only the log's end can be a torn write: a rolled segment's is damage
        for a, b in zip(cuts, cuts[1:], strict=False):
            yield SegmentSplit(
                log.topic, log.partition, str(seg.dir), seg.base_offset, seg.inode, a, b, lo, hi,
                at_tail=active and b == size, include_headers=opts.include_headers,
            )


def _open_read_only(manager: LogManager, location: PartitionLocation) -> Log:
    """The partition's log opened as ``logctl consume`` opens it: the engine's read-only load,
    which repairs nothing and refuses what recovery would change first (an interrupted
    compaction swap: ``NeedsRecoveryError``), so a read never misses offsets a swap moved.

    ``Log`` is built here rather than through ``manager.get_log``, which rescans every log dir
    per call: planning thousands of partitions would be quadratic.
    """
    return Log(location.path, manager.topic_config(location.topic), location.log_dir,
               topic=location.topic, partition=location.partition, read_only=True)


def _tiered_splits(log: Log, rp: RemotePartition, location: RemoteLocation, version: PartitionVersion,
                   opts: ReadOptions) -> Iterator[Split]:
    """The splits of a tiered partition's logical log (``docs/object-storage.md``): one per remote
    segment of ``version`` holding offsets of the range, then the local log from the tier's end
    (local segments below it are shadowed copies). The partition's log start offset is the
    version's; its log end offset the local log's."""
    check_tiers_meet(log, version)  # as every reader of two tiers does, before planning a split
    tp = (log.topic, log.partition)
    lo, hi = opts.offset_range(tp, version.log_start_offset, log.log_end_offset,
                               lambda ts: tiered_offset_for_timestamp(log, rp, version, ts))
    tier_end = version.end_offset
    remote_hi = min(hi, tier_end)
    for seg in version.segments:
        if seg.end_offset > lo and seg.base_offset < remote_hi:
            yield RemoteSegmentSplit(log.topic, log.partition, location, seg, lo, remote_hi, opts.include_headers,
                                     version.version)
    if hi > tier_end:
        yield from _log_splits(log, max(lo, tier_end), hi, opts)


class _RemoteTiers:
    """The read's remote location, resolved (and proved reachable) at the first tiered topic met,
    so a read of untiered topics needs no remote storage at all."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._location: RemoteLocation | None = None

    def partition(self, topic: str, partition: int) -> tuple[RemoteLocation, RemotePartition]:
        if self._location is None:
            self._location = job_location(self.url)
        return self._location, executor_partition(self._location, topic, partition)


def plan_splits(opts: ReadOptions) -> list[Split]:
    """Every split of a read, in topic, partition and offset order (runs on the driver)."""
    splits: list[Split] = []
    tiers = _RemoteTiers(opts.remote_storage)
    with LogManager(list(opts.log_dirs), read_only=True) as manager:
        topics = _chosen_topics(set(manager.topic_names()), opts)
        if opts.topics is None and opts.topic_pattern is None and opts.assign is None:
            locations = manager.partition_locations()
        else:  # only the topics read are checked: another topic's bad file fails its own reads
            locations = manager.partition_locations(topics)
        for tp in _choose_partitions(opts, topics, sorted(locations)):
            log = _open_read_only(manager, locations[tp])
            try:
                version = None
                if log.config.remote_storage_enable:
                    location, rp = tiers.partition(*tp)
                    version = rp.latest()
                if version is not None:
                    splits.extend(_tiered_splits(log, rp, location, version, opts))
                    continue
                lo, hi = opts.offset_range(tp, log.log_start_offset, log.log_end_offset, _offset_lookup(log))
                if lo < hi:
                    splits.extend(_log_splits(log, lo, hi, opts))
            finally:
                log.close()
    return splits


# ---------------------------------------------------------------------- reading (executors)

#: Segment settings only matter to writers and index sizing; a reader needs none of a topic's.
_READ_CONFIG = LogConfig()


def _open_planned_segment(split: SegmentSplit) -> LogSegment:
    """The planned file, read-only: under its name, else under ``.deleted`` (renamed by retention
    or a compaction swap since planning), recognised by its inode either way."""
    for suffix in ("", DELETED_SUFFIX):
        try:
            seg = LogSegment(Path(split.directory), split.base_offset, _READ_CONFIG, file_suffix=suffix, writable=False)
        except FileNotFoundError:
            continue
        if seg.inode == split.inode:
            return seg
        seg.close(trim_indexes=False)
    raise SegmentChangedError(
        f"segment {split.base_offset:020d}.log of {split.topic}-{split.partition} in {split.directory} was deleted "
        "or replaced after the query was planned; run the query again"
    )


def _grouped(raws: Iterator[RawBatch]) -> Iterator[list[RawBatch]]:
    """``raws`` in groups small enough to decode at once."""
    group: list[RawBatch] = []
    rows = size = 0
    for raw in raws:
        group.append(raw)
        rows += max(raw.header.records_count, 1)
        size += raw.header.size_in_bytes
        if rows >= MAX_BATCH_ROWS or size >= _DECODE_GROUP_BYTES:
            yield group
            group, rows, size = [], 0, 0
    if group:
        yield group


def _decode_groups(seg: LogSegment, split: SegmentSplit) -> Iterator[list[RawBatch]]:
    """The split's batches in groups; checks the range ended on the planned boundary, so a wrong
    cut can never drop a batch silently."""
    reached = split.start_position

    def tracked() -> Iterator[RawBatch]:
        nonlocal reached
        for raw in seg.batches(split.start_position, split.end_position):
            reached = raw.position + raw.header.size_in_bytes
            yield raw

    yield from _grouped(tracked())
    if reached != split.end_position and not split.at_tail:
        if seg.refresh_size() < split.end_position:
            raise SegmentChangedError(
                f"{seg.log_path} was truncated below byte {split.end_position} after the query was planned; "
                "run the query again"
            )
        raise CorruptRecordError(
            f"the split ended at byte {reached} instead of the planned batch boundary {split.end_position}",
            path=str(seg.log_path),
            position=reached,
        )


def _constant_strings(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a string array, built from two buffers instead of n objects."""
    data = text.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


def to_spark_batch(decoded: pa.RecordBatch, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    """A batch of the engine's :data:`storage_engine.record.ARROW_SCHEMA` in Spark's Kafka layout:
    topic and partition added, epoch milliseconds turned into UTC microseconds, columns ordered,
    ``headers`` only when the read includes them."""
    n = decoded.num_rows
    millis = decoded.column("timestamp")
    columns = [
        decoded.column("key"),
        decoded.column("value"),
        _constant_strings(topic, n),
        pa.array(np.full(n, partition, dtype=np.int32)),
        decoded.column("offset"),
        pc.multiply_checked(millis, 1000).cast(KAFKA_ARROW_SCHEMA.field("timestamp").type),
        decoded.column("timestampType"),
    ]
    if include_headers:
        columns.append(decoded.column(_HEADERS).cast(KAFKA_ARROW_SCHEMA.field(_HEADERS).type))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def _bounded(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """Slices of at most :data:`MAX_BATCH_ROWS` rows and about :data:`MAX_BATCH_BYTES` bytes."""
    n = batch.num_rows
    if n == 0:
        return
    per_row = max(1, batch.nbytes // n)
    step = max(1, min(MAX_BATCH_ROWS, MAX_BATCH_BYTES // per_row))
    for offset in range(0, n, step):
        yield batch.slice(offset, step)


def _spark_batches(groups: Iterator[list[RawBatch]], path: str, split: Split) -> Iterator[pa.RecordBatch]:
    for group in groups:
        decoded = batches_to_arrow(group, verify=True, path=path, min_offset=split.min_offset,
                                   max_offset=split.max_offset)
        yield from _bounded(to_spark_batch(decoded, split.topic, split.partition, split.include_headers))


def read_split(split: Split) -> Iterator[pa.RecordBatch]:
    """The records of one split in Spark's Arrow layout (runs on an executor; writes nothing)."""
    if isinstance(split, RemoteSegmentSplit):
        rp = executor_partition(split.location, split.topic, split.partition)
        batches = remote_segment_batches(rp, split.segment, split.min_offset)
        try:
            yield from _spark_batches(_grouped(batches), object_url(rp, split.segment.log), split)
        except ObjectMissingError as exc:  # swept: past logplat.remote.version.retention.ms, or deleted by hand
            raise SegmentChangedError(f"{exc} (remote version {split.version} of {split.topic}-{split.partition}, "
                                      "which the query was planned on); run the query again") from None
        return
    seg = _open_planned_segment(split)
    try:
        yield from _spark_batches(_decode_groups(seg, split), str(seg.log_path), split)
    finally:
        seg.close(trim_indexes=False)


# ---------------------------------------------------------------------- the Spark classes


class KafkaLogReader(DataSourceReader):
    """Holds only the parsed options, so it pickles small and opens nothing until asked."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return plan_splits(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark substitutes one InputPartition(None) when planning found nothing to read.
        if isinstance(partition, SegmentSplit | RemoteSegmentSplit):
            yield from read_split(partition)


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafka-log")``; see the module docstring and :class:`ReadOptions`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        # Spark calls this at ``load()``: checking the options here reports a malformed one
        # there, before any action, while everything that needs the files waits for planning.
        return source_schema(ReadOptions.parse(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = ReadOptions.parse(self.options)
        expected = source_schema(options.include_headers)
        if schema != expected:
            raise DataSourceOptionError(
                f"kafka-log returns {expected.simpleString()} here; a user schema "
                f"({schema.simpleString()}) cannot change that: select or cast the columns instead"
            )
        return KafkaLogReader(options)
