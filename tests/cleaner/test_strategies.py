"""Compaction strategies (KIP-280), case by case; ``test_props.py`` checks them against a model
on random logs and ``tests/spark/test_compaction.py`` checks the Spark job against the cleaner."""

from __future__ import annotations

import filecmp
import struct

from storage_engine.cleaner import LogCleaner
from storage_engine.log.append_validation import ProducerRecord
from tests.helpers.cleaner import NOW, compacted, content


def _rec(key: str, value: str | None, ts: int = NOW, version: int | bytes | None = None) -> ProducerRecord:
    headers = () if version is None else (("ver", version if isinstance(version, bytes) else struct.pack(">q", version)),)
    return ProducerRecord(key.encode(), None if value is None else value.encode(), ts, headers)


def test_offset_strategy_writes_the_bytes_it_always_wrote(tmp_path):
    """``compaction.strategy=offset`` is Kafka's rule on the cleaner's unchanged path."""
    for name, extra in (("default", {}), ("offset", {"compaction_strategy": "offset"})):
        with compacted(tmp_path / name, segment_bytes="200", **extra) as m:
            log = m.get_log("t", 0)
            for i in range(30):
                log.append([_rec(f"k{i % 4}", f"v{i}", NOW - i)], now=NOW)
            LogCleaner(m).compact("t", 0, now_ms=NOW)
    a, b = tmp_path / "default" / "t-0", tmp_path / "offset" / "t-0"
    logs = sorted(p.name for p in a.iterdir() if p.suffix == ".log")
    assert logs and all(filecmp.cmp(a / n, b / n, shallow=False) for n in logs)


def test_a_deleted_key_never_comes_back_through_the_newest_record(tmp_path):
    """The newest record of a pass stays whatever its version. Here it is an older version of a
    key whose winner is a tombstone past its horizon: the tombstone stays while that record
    does (without it the key would read as live again), the next pass drops the record (no
    longer the newest) and the tombstone with it."""
    with compacted(tmp_path, segment_bytes="120", delete_retention_ms="0", compaction_strategy="timestamp") as m:
        log = m.get_log("t", 0)
        log.append([_rec("a", "old", NOW)], now=NOW)
        log.append([_rec("a", None, NOW + 10)], now=NOW)  # the delete
        log.roll()
        LogCleaner(m).compact("t", 0, now_ms=NOW)  # stamps the tombstone's delete horizon (now + 0)
        assert [(o, v) for o, _, v in content(log)] == [(1, None)]
        log.append([_rec("a", "stale", NOW + 5)], now=NOW)  # arrives late: a lower version
        log.roll()
        LogCleaner(m).compact("t", 0, now_ms=NOW + 1)  # the horizon has passed, but "stale" is the newest
        assert [(o, v) for o, _, v in content(log)] == [(1, None), (2, "stale")]
        log.append([_rec("b", "1", NOW + 20)], now=NOW + 1)
        log.roll()
        LogCleaner(m).compact("t", 0, now_ms=NOW + 2)
        assert [(o, k, v) for o, k, v in content(log)] == [(3, "b", "1")]


def test_a_record_without_a_readable_version_counts_as_the_lowest_and_is_reported(tmp_path):
    """``header``: versions in an 8-byte big-endian long; no header, or a value of another
    length, loses to any version and is counted and warned about."""
    with compacted(tmp_path, segment_bytes="150", compaction_strategy="header",
                   compaction_strategy_header="ver") as m:
        log = m.get_log("t", 0)
        log.append([_rec("a", "v5", version=5)], now=NOW)
        log.append([_rec("a", "none")], now=NOW)
        log.append([_rec("a", "bad", version=b"9")], now=NOW)
        log.append([_rec("a", "v-1", version=-1)], now=NOW)
        log.append([_rec("z", "last", version=0)], now=NOW)
        log.roll()
        report = LogCleaner(m).compact("t", 0, now_ms=NOW)
        assert [(k, v) for _, k, v in content(log)] == [("a", "v5"), ("z", "last")]
        assert report.stats.records_without_version == 2
        assert any("2 record(s) had no readable version in header 'ver'" in w for w in report.warnings)
