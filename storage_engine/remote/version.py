"""A partition's remote metadata version: the JSON object ``versions/<N>.json`` holds, and the
strict reading of it.

A version is the whole state of the partition's remote tier (Delta Lake's log entries are
changes; here each entry is complete, so a reader needs one GET): the segments in offset
order, each with its objects, offsets, size and timestamps; the log start offset; the cleaner
checkpoint; the producer snapshot at the tier's end; what the change did (``operation``,
``summary``); and the objects earlier versions named that this one no longer does
(``released``, with when), which the sweeper deletes after ``file.delete.delay.ms``.

Reading is as strict as command-line input: unknown or missing fields, wrong types, offsets out
of order and object names outside the partition's ``data/`` are refused
(:class:`~.errors.RemoteMetadataError`), so no path or key is ever built from a bad version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from ..config.topic import LogConfig
from ..files.strict_json import loads_strict
from .errors import RemoteMetadataError
from .names import check_data_name

FORMAT = "logplat-remote-version/1"
OPERATIONS = ("tier", "compact", "retention", "delete-records", "restore")


@dataclass(frozen=True)
class RemoteSegment:
    """One segment in the remote tier: offsets ``[base_offset, end_offset)`` (the end is the next
    segment's base, whatever compaction removed), its objects and the stats planners need."""

    base_offset: int
    end_offset: int
    size_bytes: int
    max_timestamp: int  # the largest record timestamp, -1 when the records carry none
    mtime_ms: int  # the local file's mtime when tiered (Kafka's fallback for time retention)
    log: str
    index: str
    time_index: str
    #: the ``.txnindex`` object, None when the segment aborted no transaction (Kafka's
    #: ``RemoteLogSegmentMetadata``/``LogSegmentData`` keep it optional, and a broker reads a
    #: missing transaction index as "no aborted transaction here"). Versions written before the
    #: field existed have none, and stay readable.
    txn_index: str | None = None

    @property
    def objects(self) -> tuple[str, ...]:
        core = (self.log, self.index, self.time_index)
        return core if self.txn_index is None else (*core, self.txn_index)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"base_offset": self.base_offset, "end_offset": self.end_offset,
                               "size_bytes": self.size_bytes, "max_timestamp": self.max_timestamp,
                               "mtime_ms": self.mtime_ms, "log": self.log, "index": self.index,
                               "time_index": self.time_index}
        if self.txn_index is not None:  # absent, not null: a segment without one encodes as before
            out["txn_index"] = self.txn_index
        return out


@dataclass(frozen=True)
class Released:
    """An object that left the versions at ``version`` (committed at ``since_ms``)."""

    name: str
    version: int
    since_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "since_ms": self.since_ms}


@dataclass(frozen=True)
class PartitionVersion:
    """One committed version of a partition's remote tier (see the module docstring)."""

    version: int
    topic: str
    partition: int
    committed_ms: int
    writer: str
    operation: str
    log_start_offset: int
    end_offset: int  # the tier's end: offsets below it are remote, at and above it local
    cleaner_checkpoint: int | None
    segments: tuple[RemoteSegment, ...]
    producer_snapshot: str | None = None
    released: tuple[Released, ...] = ()
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments)

    @property
    def objects(self) -> set[str]:
        """Every object this version names (what must exist for it to be read)."""
        out = {name for seg in self.segments for name in seg.objects}
        if self.producer_snapshot:
            out.add(self.producer_snapshot)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": self.version, "topic": self.topic, "partition": self.partition,
                "committed_ms": self.committed_ms, "writer": self.writer, "operation": self.operation,
                "log_start_offset": self.log_start_offset, "end_offset": self.end_offset,
                "cleaner_checkpoint": self.cleaner_checkpoint,
                "segments": [s.to_json() for s in self.segments],
                "producer_snapshot": self.producer_snapshot,
                "released": [r.to_json() for r in self.released], "summary": self.summary}

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()

    def successor(self, *, writer: str, operation: str, committed_ms: int, release_horizon_ms: int,
                  summary: dict[str, Any], **changes: Any) -> PartitionVersion:
        """The next version: this one with ``changes`` (segments, offsets, checkpoint, snapshot)
        and ``released`` computed, never by hand: every object this version names that the next
        does not is released at the next version's commit time, and this version's releases are
        carried forward while younger than ``release_horizon_ms`` (the version retention plus
        ``file.delete.delay.ms``: older ones are for the orphan sweep). Every writer (tiering,
        compaction, retention, delete-records, restore) builds its version here."""
        nxt = replace(self, version=self.version + 1, writer=writer, operation=operation,
                      committed_ms=committed_ms, summary=summary, **changes)
        kept = nxt.objects
        carried = [r for r in self.released if r.since_ms >= committed_ms - release_horizon_ms and r.name not in kept]
        new = [Released(name, nxt.version, committed_ms) for name in sorted(self.objects - kept)]
        return replace(nxt, released=(*carried, *new))


def release_horizon_ms(config: LogConfig) -> int:
    """How long a version lists a released object (see :meth:`PartitionVersion.successor`)."""
    return config.logplat_remote_version_retention_ms + config.file_delete_delay_ms


def empty_version(topic: str, partition: int, log_start_offset: int) -> PartitionVersion:
    """Version 0: the state before the first commit (nothing remote; it is never written)."""
    return PartitionVersion(0, topic, partition, 0, "", "tier", log_start_offset, log_start_offset, None, ())


_SEGMENT_FIELDS = {"base_offset": int, "end_offset": int, "size_bytes": int, "max_timestamp": int, "mtime_ms": int,
                   "log": str, "index": str, "time_index": str}
_SEGMENT_OPTIONAL = {"txn_index": str}
_VERSION_FIELDS = {"format": str, "version": int, "topic": str, "partition": int, "committed_ms": int,
                   "writer": str, "operation": str, "log_start_offset": int, "end_offset": int,
                   "cleaner_checkpoint": (int, type(None)), "segments": list, "producer_snapshot": (str, type(None)),
                   "released": list, "summary": dict}
_RELEASED_FIELDS = {"name": str, "version": int, "since_ms": int}


def _fields(obj: object, spec: dict[str, Any], where: str, optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` if it has exactly ``spec``'s fields, of their types, plus any of ``optional``'s
    (fields added to the format later: a version written before them lacks them)."""
    if not isinstance(obj, dict):
        raise RemoteMetadataError(f"{where}: expected a JSON object")
    optional = optional or {}
    if not set(spec) <= set(obj) <= set(spec) | set(optional):
        missing, extra = sorted(set(spec) - set(obj)), sorted(set(obj) - set(spec) - set(optional))
        raise RemoteMetadataError(f"{where}: fields missing {missing} or unknown {extra}")
    for name, kind in (*spec.items(), *((n, k) for n, k in optional.items() if n in obj)):
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            raise RemoteMetadataError(f"{where}: field {name!r} has the wrong type ({type(value).__name__})")
        if isinstance(value, int) and not -1 <= value < 2**63:
            raise RemoteMetadataError(f"{where}: field {name!r} = {value} is out of range")
    return obj


def decode_version(data: bytes, *, topic: str, partition: int, version: int, where: str) -> PartitionVersion:
    """The version in ``data``, which must be version ``version`` of ``topic``-``partition``."""
    try:
        obj = loads_strict(data)
    except ValueError as exc:
        raise RemoteMetadataError(f"{where}: not a version object: {exc}") from exc
    v = _fields(obj, _VERSION_FIELDS, where)
    if v["format"] != FORMAT or v["operation"] not in OPERATIONS:
        raise RemoteMetadataError(f"{where}: format {v['format']!r} / operation {v['operation']!r} unknown")
    if (v["topic"], v["partition"], v["version"]) != (topic, partition, version):
        raise RemoteMetadataError(f"{where}: names {v['topic']}-{v['partition']} version {v['version']}, "
                                  f"expected {topic}-{partition} version {version}")
    segments = []
    expected = None
    for i, raw in enumerate(v["segments"]):
        s = _fields(raw, _SEGMENT_FIELDS, f"{where} segment {i}", _SEGMENT_OPTIONAL)
        txn = s.get("txn_index")
        seg = RemoteSegment(s["base_offset"], s["end_offset"], s["size_bytes"], s["max_timestamp"], s["mtime_ms"],
                            check_data_name(s["log"], "log"), check_data_name(s["index"], "index"),
                            check_data_name(s["time_index"], "timeindex"),
                            check_data_name(txn, "txnindex") if txn is not None else None)
        if seg.base_offset < 0 or seg.end_offset <= seg.base_offset or seg.size_bytes < 0 or (
                expected is not None and seg.base_offset != expected):
            raise RemoteMetadataError(f"{where} segment {i}: offsets [{seg.base_offset}, {seg.end_offset}) "
                                      "do not follow the previous segment")
        expected = seg.end_offset
        segments.append(seg)
    end = v["end_offset"]
    if (segments and end != segments[-1].end_offset) or v["log_start_offset"] < 0 or v["log_start_offset"] > end or (
            segments and v["log_start_offset"] < segments[0].base_offset) or (
            segments and v["log_start_offset"] >= segments[0].end_offset):
        raise RemoteMetadataError(f"{where}: log start offset {v['log_start_offset']} and end offset {end} do not "
                                  "match the segments")
    released = tuple(Released(check_data_name(r["name"]), r["version"], r["since_ms"])
                     for r in (_fields(x, _RELEASED_FIELDS, f"{where} released") for x in v["released"]))
    snap = v["producer_snapshot"]
    return PartitionVersion(version, topic, partition, v["committed_ms"], v["writer"], v["operation"],
                            v["log_start_offset"], end, v["cleaner_checkpoint"], tuple(segments),
                            check_data_name(snap, "snapshot") if snap is not None else None, released, v["summary"])
