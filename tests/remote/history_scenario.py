"""A tiered partition with a history, for the history, restore, sweep and kill tests: version 1
tiers the rolled segments, version 2 is a retention of the first two (built with successor(),
as every writer builds its version), and the records a version holds, read from its objects."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from storage_engine.config.topic import LogConfig
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch, scan_batches
from storage_engine.remote.access import remote_partition
from storage_engine.remote.names import PINS, new_writer_id
from storage_engine.remote.partition import RemotePartition, wall_clock_ms
from storage_engine.remote.tiering import tier_partition
from storage_engine.remote.version import PartitionVersion, release_horizon_ms
from tests.helpers.engine import append_each, open_topic, records


@dataclass
class Tiered:
    root: Path
    manager: LogManager
    rp: RemotePartition

    @property
    def config(self) -> LogConfig:
        return self.manager.topic_config("t")

    def tier_more(self, n: int = 15) -> PartitionVersion:
        log = self.manager.get_log("t", 0)
        append_each(log, records(n, start=log.log_end_offset))
        tier_partition(log, self.rp, now_ms=10**6, release_local=False)
        return self.rp.latest()

    def retention(self, drop: int = 2) -> PartitionVersion:
        """A retention-like version: the first ``drop`` remote segments leave it."""
        v = self.rp.latest()
        return self.rp.commit(v.successor(writer=new_writer_id(), operation="retention", committed_ms=wall_clock_ms(),
                                          release_horizon_ms=release_horizon_ms(self.config),
                                          summary={"segments": [s.base_offset for s in v.segments[:drop]]},
                                          segments=v.segments[drop:], log_start_offset=v.segments[drop].base_offset))

    def names(self) -> set[str]:
        """Every object under the partition's folder (relative to it)."""
        return {o.name[len(self.rp.prefix):] for o in self.rp.store.list(self.rp.prefix)}

    def pins(self) -> list[str]:
        return [o.name for o in self.rp.store.list(self.rp.name(PINS))]


def tiered(root: Path, **configs: object) -> Tiered:
    """Version 1 of ``t-0``: 30 records in segments of 300 bytes, every rolled one tiered."""
    manager = open_topic(root, segment_bytes=300, remote_storage_enable="true", **configs)
    log = manager.get_log("t", 0)
    append_each(log, records(30))
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, now_ms=10**6, release_local=False)
    return Tiered(root, manager, rp)


def version_records(rp: RemotePartition, version: PartitionVersion) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record ``version`` holds, read from its objects."""
    out = []
    for seg in version.segments:
        for raw in scan_batches(rp.read(seg.log), path=seg.log):
            out.extend((r.offset, r.value) for r in decode_batch(raw) if r.offset >= version.log_start_offset)
    return out
