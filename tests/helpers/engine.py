"""Small builders shared by the engine tests: a manager on a temp dir, keyed records, damage."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from storage_engine.files.naming import parse_partition_dir
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.record import scan_batches


def records(n: int, *, start: int = 0, ts: int = 1_000, keys: int | None = None, value_size: int = 20) -> list[ProducerRecord]:
    """``n`` records with distinct values; keys cycle over ``keys`` distinct keys when given."""
    out = []
    for i in range(start, start + n):
        key = f"k{i % keys if keys else i}".encode()
        value = (f"v{i}-".encode() * value_size)[:value_size]
        out.append(ProducerRecord(key, value, ts + i, (("h", f"{i}".encode()),)))
    return out


def open_topic(root: Path, topic: str = "t", partitions: int = 1, **configs: object) -> LogManager:
    """A manager over ``root`` with ``topic`` created; config keys use underscores for dots."""
    manager = LogManager([root])
    manager.admin.create_topic(topic, partitions, {k.replace("_", "."): str(v) for k, v in configs.items()})
    return manager


def append_each(log, recs: Iterable[ProducerRecord], **kwargs) -> None:
    """One batch per record: the finest-grained appends, so index and roll rules show."""
    for r in recs:
        log.append([r], **kwargs)


def fixture_log_dirs(root: Path) -> list[Path]:
    """Every directory under ``root`` holding partition directories with segment files (live or
    left over): how the broker-written fixtures are laid out."""
    import re

    found = set()
    for path in root.rglob("*"):
        if path.is_file() and re.fullmatch(r"\d{20}\.log(\.swap|\.deleted)?", path.name):
            if parse_partition_dir(path.parent.name):
                found.add(path.parent.parent)
    return sorted(found)


def flip_last_byte(log_file: Path, batch: int) -> int:
    """Damage batch number ``batch`` of the file inside its CRC (a bit rot, or a write the
    crash tore inside the page cache); returns its base offset."""
    raw = list(scan_batches(log_file.read_bytes()))[batch]
    with open(log_file, "r+b") as f:
        f.seek(raw.position + raw.header.size_in_bytes - 1)
        last = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([last[0] ^ 0xFF]))
    return raw.header.base_offset


def partition_stats(root: Path) -> list:
    """What the dry runs and the sensors plan from: every partition's stats, read-only."""
    with LogManager([root], read_only=True) as manager:
        return list(manager.partition_stats())


class TakenListing(list):
    """Directory entries listed earlier, usable as ``os.scandir``'s iterator and context manager:
    what a test hands a reader after another process changed the directory under it."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
