"""The local copy of a partition's latest remote version, kept in its local directory.

Sensors judge thousands of partitions per tick from cheap stats (``log/stats.py``); a GET per
tiered partition per tick would not be cheap. Kafka's brokers likewise keep the remote log
metadata they consumed in a local cache. Every commit this platform makes (tiering, compaction,
retention, delete-records, restore; the Spark compaction job's by its driver, the retention
job's by its executors, which open the log dirs)
writes the committed version's planning facts to ``remote-log-metadata.json`` beside the
segments (:func:`remember`), atomically; :func:`recall` reads it back as strictly as any input.

It is a cache, never the truth: every change re-reads the latest version from the bucket and
commits conditionally, so a stale copy can only delay a sensor's request, never change data;
the next commit of this platform refreshes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..files.durable import atomic_write
from ..files.naming import REMOTE_LOG_METADATA_FILE
from ..files.nofollow import open_nofollow
from ..files.strict_json import loads_strict
from .errors import RemoteStorageError
from .version import PartitionVersion

STATE_FILE = REMOTE_LOG_METADATA_FILE


@dataclass(frozen=True)
class RemoteTierState:
    """The planning facts of a partition's latest known remote version."""

    location: str
    version: int
    committed_ms: int
    log_start_offset: int
    end_offset: int
    cleaner_checkpoint: int | None
    segments: tuple[tuple[int, int, int, int, int], ...]  # (base, end, size, max timestamp, mtime ms)

    @property
    def size_bytes(self) -> int:
        return sum(s[2] for s in self.segments)

    @classmethod
    def of(cls, location: str, version: PartitionVersion) -> RemoteTierState:
        return cls(location, version.version, version.committed_ms, version.log_start_offset, version.end_offset,
                   version.cleaner_checkpoint,
                   tuple((s.base_offset, s.end_offset, s.size_bytes, s.max_timestamp, s.mtime_ms)
                         for s in version.segments))


def remember(partition_dir: Path, location: str, version: PartitionVersion) -> None:
    """Record ``version`` as the latest of ``partition_dir``'s remote tier (never an older one
    over a newer: two committers of one machine may finish out of order)."""
    known = recall(partition_dir, location)
    if known is not None and known.version >= version.version:
        return
    state = RemoteTierState.of(location, version)
    body = {"location": state.location, "version": state.version, "committed_ms": state.committed_ms,
            "log_start_offset": state.log_start_offset, "end_offset": state.end_offset,
            "cleaner_checkpoint": state.cleaner_checkpoint, "segments": [list(s) for s in state.segments]}
    atomic_write(Path(partition_dir) / STATE_FILE, json.dumps(body, separators=(",", ":")).encode())


def _read_state(partition_dir: Path) -> RemoteTierState | None:
    """The remembered state, whatever its location; None when absent or not exactly parseable."""
    try:
        fd = open_nofollow(Path(partition_dir) / STATE_FILE, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(1 << 26)
    try:
        obj = loads_strict(data)
        segments = tuple(tuple(int(x) for x in s) for s in obj["segments"])
        if any(len(s) != 5 for s in segments):
            return None
        return RemoteTierState(str(obj["location"]), int(obj["version"]), int(obj["committed_ms"]),
                               int(obj["log_start_offset"]), int(obj["end_offset"]),
                               None if obj["cleaner_checkpoint"] is None else int(obj["cleaner_checkpoint"]),
                               segments)  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError):
        return None


def recall(partition_dir: Path, location: str) -> RemoteTierState | None:
    """The remembered state for ``location``, or None: no file, another location's, or a file
    that does not parse exactly (then the sensors treat the tier as unknown until a commit)."""
    state = _read_state(partition_dir)
    return state if state is not None and state.location == location else None


def check_location(partition_dir: Path, location: str) -> None:
    """Refuse to work on ``location`` for a partition whose tier is remembered elsewhere: a
    changed ``LOGPLAT_REMOTE_STORAGE`` would otherwise start a second, empty tier and hide
    every record of the first (its local copies may be released already)."""
    state = _read_state(partition_dir)
    if state is not None and state.location != location:
        raise RemoteStorageError(
            f"{Path(partition_dir).name} is tiered at {state.location} (remote version {state.version}), but "
            f"LOGPLAT_REMOTE_STORAGE names {location}: set it back; nothing was done")
