"""Builders and readers shared by the cleaner, crash, property and Spark tests: partitions made
through appends or from raw batches (transactions, markers, unkeyed records), and their content."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from storage_engine.cleaner import STAGING_SUFFIX, Cleaner, LogCleaner
from storage_engine.cleaner.offset_map import OffsetMap
from storage_engine.config.cleaner import CleanerConfig
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType, Record, encode_batch
from storage_engine.record.control import ControlRecordType
from tests.helpers.engine import open_topic

NOW = 1_000_000_000
RETENTION = 86_400_000  # delete.retention.ms default
MIB = 1024 * 1024


def compacted(root: Path, **configs) -> LogManager:
    """A manager with topic ``t`` (one partition), compacted, cleanable at any ratio, .deleted
    files removed at once."""
    defaults = {"cleanup_policy": "compact", "min_cleanable_dirty_ratio": "0.01", "file_delete_delay_ms": "0"}
    return open_topic(root, "t", **{**defaults, **configs})


def put(log, *pairs, ts: int = NOW, **kwargs) -> None:
    """One batch holding ``pairs`` of (key, value) strings (value None = tombstone)."""
    log.append(
        [ProducerRecord(k.encode() if k is not None else None, v.encode() if v is not None else None, ts)
         for k, v in pairs],
        now=ts,
        **kwargs,
    )


def content(log) -> list[tuple[int, str | None, str | None]]:
    """Every data record from the log start: (offset, key, value)."""
    log.refresh()
    if log.log_end_offset == log.log_start_offset:
        return []
    out = log.read(log.log_start_offset, max_records=10**9, max_bytes=8 * MIB)
    return [(r.offset, _s(r.key), _s(r.value)) for r in out]


def _s(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


def headers(log) -> list:
    """Every batch header (control and empty batches included), in offset order."""
    log.refresh()
    return [b.header for b in log.iter_batches()]


def latest_per_key(records) -> list[tuple[int, str | None, str | None]]:
    latest = {}
    for off, k, v in records:
        latest[k] = (off, k, v)
    return sorted(latest.values())


def checkpoint(log) -> int | None:
    return log.log_dir.cleaner_offsets.get((log.topic, log.partition))


def data_batch(base: int, pairs, *, ts: int = NOW, pid: int = -1, epoch: int = -1, seq: int = -1,
               transactional: bool = False, codec: CompressionType = CompressionType.NONE) -> bytes:
    recs = [Record(base + i, ts, None if k is None else k.encode(), None if v is None else v.encode())
            for i, (k, v) in enumerate(pairs)]
    return encode_batch(recs, base_offset=base, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=transactional, compression=codec)


def marker(offset: int, pid: int, epoch: int, *, commit: bool, ts: int = NOW) -> bytes:
    rec = Record(offset, ts, struct.pack(">hh", 0, ControlRecordType.COMMIT if commit else ControlRecordType.ABORT), struct.pack(">hi", 0, 0))
    return encode_batch([rec], base_offset=offset, producer_id=pid, producer_epoch=epoch, is_transactional=True,
                        is_control=True)


def raw_log(root: Path, segments: list[list[bytes]], **configs) -> LogManager:
    """Topic ``t`` whose partition is exactly these segments of raw batches (each segment's base is
    its first batch's base offset); the loader rebuilds the indexes. The last one is active."""
    compacted(root, **configs).close()
    part = root / "t-0"
    for name in os.listdir(part):
        if name[:1].isdigit():
            os.unlink(part / name)
    for batches in segments:
        base = struct.unpack(">q", batches[0][:8])[0]
        (part / f"{base:020d}.log").write_bytes(b"".join(batches))
    return LogManager([root])


def compact(m: LogManager, now: int = NOW, **kwargs):
    return LogCleaner(m).compact("t", 0, now_ms=now, **kwargs)


def temp_files(root: Path) -> list[str]:
    return [n for n in os.listdir(root / "t-0") if n.endswith((".cleaned", ".swap", ".deleted", STAGING_SUFFIX))]


def small_map_cleaner(keys: int, key_len: int = 3, *, versioned: bool = False, **kwargs) -> Cleaner:
    """A cleaner whose offset map holds ``keys`` keys of ``key_len`` bytes and not one more (of a
    version strategy's map when ``versioned``), under the core in use: its budget lies halfway
    between what ``keys`` and ``keys + 1`` keys need (``OffsetMap.capacity_for``: 224 B a 3-byte key
    in the reference's dict, the compiled ``KeyMap``'s own growth otherwise)."""
    memory = 2 * MIB
    low = OffsetMap.capacity_for(keys, key_len, versioned=versioned)
    high = OffsetMap.capacity_for(keys + 1, key_len, versioned=versioned)
    return Cleaner(CleanerConfig(dedupe_buffer_size=memory, io_buffer_load_factor=(low + high) / 2 / memory), **kwargs)
