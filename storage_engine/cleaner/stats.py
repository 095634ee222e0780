"""Counters of a pass (Kafka's ``CleanerStats``), summed over a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class CleanerStats:
    """Counters of one pass (or, summed, of a run): what Kafka's cleaner logs, and more."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_written: int = 0
    batches_read: int = 0
    batches_written: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    scan_bytes_read: int = 0
    duplicates_removed: int = 0
    tombstones_removed: int = 0
    unkeyed_removed: int = 0
    aborted_removed: int = 0
    markers_removed: int = 0
    batches_copied: int = 0
    batches_rebuilt: int = 0
    empty_batches_kept: int = 0
    horizons_stamped: int = 0
    records_without_version: int = 0  # header strategy: mapped records whose version header is absent or bad
    scan_seconds: float = 0.0
    index_seconds: float = 0.0
    clean_seconds: float = 0.0
    swap_seconds: float = 0.0

    def add(self, other: CleanerStats) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)
