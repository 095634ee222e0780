"""The scenario the UI is judged on: the logs behind ``tests/platform/test_ui_truth.py`` and
``scripts/screenshots.py``, so the screenshots show what the test proves.

* ``orders`` (compacted, 3 partitions): partition 0 holds a few records in its active segment
  (nothing to clean), partition 1 is dirty and has a corrupt batch (its cleaning fails on it),
  partition 2 is dirty (cleaning due);
* ``erasures`` (compacted, ``max.compaction.lag.ms`` of a minute, idle segments rolled by the
  cleaner): written once with superseded keys (``write_erasures``), then left idle, so its
  erasure deadline passes while nothing is appended.
"""

from __future__ import annotations

from pathlib import Path

from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType

from .workload import TopicWorkload, produce

LAG_MS = 60_000
ORDERS = TopicWorkload("orders", 3, {"cleanup.policy": "compact", "segment.bytes": "4096"},
                       records=400, keys=40, value_bytes=40, partition_records={0: 5}, batch_records=10,
                       compression=CompressionType.NONE)
ERASURES = {"cleanup.policy": "compact", "segment.bytes": "1024", "max.compaction.lag.ms": str(LAG_MS),
            "logplat.roll.idle.segments": "true"}
CORRUPT_PARTITION = 1


def write_scenario(logs: Path, now_ms: int) -> None:
    """``orders`` written and its partition 1 damaged; ``erasures`` created empty."""
    with LogManager([logs]) as manager:
        produce(manager, [ORDERS], now_ms=now_ms)
        manager.admin.create_topic("erasures", 1, ERASURES)
    first = sorted((logs / f"orders-{CORRUPT_PARTITION}").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    first.write_bytes(bytes(data))


def write_erasures(logs: Path) -> None:
    """60 records over 5 keys, appended now: every key superseded in the segments that roll."""
    with LogManager([logs]) as manager:
        log = manager.get_log("erasures", 0)
        for i in range(60):
            log.append([ProducerRecord(f"user-{i % 5}".encode(), b"x" * 60, None)])
