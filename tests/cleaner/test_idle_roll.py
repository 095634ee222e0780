"""``logplat.roll.idle.segments``: a compaction run rolls an idle active segment once its first
record is the topic's max segment ms old (``LogConfig.max_segment_ms``), which Kafka does only on
an append; only when the topic asks for it, only past the bound; then the cleaner erases what the
active segment held. Without it the erasure report names the active segment as what holds the
superseded record."""

from __future__ import annotations

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.cleaner.erasure import erasure_report
from storage_engine.errors import ConfigError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.engine import append_each, open_topic

T0 = 1_700_000_000_000
LAG_MS = 240_000  # the max.compaction.lag.ms: a compacted topic's max segment ms is half of it
SEGMENT_MS = LAG_MS // 2
#: Kafka's shouldRoll rolls once more than segment.ms has passed since the first batch: 1 ms later
ROLL_AT = T0 + SEGMENT_MS + 1


def _idle(root, **configs) -> None:
    """``alice`` written and tombstoned once, then nothing: every record in the active segment."""
    manager = open_topic(root, "t", 1, cleanup_policy="compact", max_compaction_lag_ms=str(LAG_MS),
                         delete_retention_ms=str(10 * LAG_MS), file_delete_delay_ms="0", **configs)
    append_each(manager.get_log("t", 0), [ProducerRecord(b"alice", b"alice@example.com", T0),
                                          ProducerRecord(b"bob", b"b1", T0), ProducerRecord(b"alice", None, T0)],
                now=T0)
    manager.close()


def _bases(root) -> list[int]:
    return sorted(int(p.name[:20]) for p in (root / "t-0").glob("*.log"))


def test_without_the_config_the_active_segment_holds_a_superseded_record_for_ever(tmp_path):
    _idle(tmp_path)
    now = T0 + 10 * LAG_MS
    with LogManager([tmp_path]) as manager:
        (candidacy,) = LogCleaner(manager).candidates(now_ms=now)
        assert not candidacy.due and candidacy.idle_roll_at is None
        assert candidacy.deadline is not None and candidacy.deadline.in_active_segment
        assert candidacy.deadline.time_left_ms == LAG_MS - 10 * LAG_MS
        assert candidacy.max_compaction_delay_ms == 0  # Kafka's measure: the active segment is not judged
        report = LogCleaner(manager).compact("t", 0, now_ms=now)
        assert report.rolled_idle_segment is None and report.skipped is not None
        proof = erasure_report(manager.get_log("t", 0), now)
    assert _bases(tmp_path) == [0]
    assert not proof.ok and proof.oldest is not None and proof.oldest.offset == 0
    assert proof.held_by is not None and proof.held_by.startswith("held by the active segment")


def test_a_run_rolls_the_idle_segment_only_past_the_bound_and_the_cleaner_then_erases(tmp_path):
    _idle(tmp_path, logplat_roll_idle_segments="true")
    with LogManager([tmp_path]) as manager:
        cleaner = LogCleaner(manager)
        (candidacy,) = cleaner.candidates(now_ms=ROLL_AT - 1)
        assert candidacy.idle_roll_at == ROLL_AT and not candidacy.idle_roll_due and not candidacy.due
        assert ROLL_AT in candidacy.clock_transitions_ms
        assert cleaner.compact_due(now_ms=ROLL_AT - 1) == []
        report = cleaner.compact("t", 0, now_ms=ROLL_AT - 1)  # forced: still nothing to roll
        assert report.rolled_idle_segment is None and _bases(tmp_path) == [0]

        (candidacy,) = cleaner.candidates(now_ms=ROLL_AT)
        assert candidacy.idle_roll_due and candidacy.due and not candidacy.kafka_due
        assert "logplat.roll.idle.segments" in candidacy.why
        (report,) = cleaner.compact_due(now_ms=ROLL_AT)  # Kafka's rule after the roll: dirty ratio 1.0
        assert report.rolled_idle_segment == 0 and report.status == "compacted", report.to_dict()
        assert report.new_checkpoint == 3
        proof = erasure_report(manager.get_log("t", 0), T0 + 10 * LAG_MS)
    assert _bases(tmp_path) == [0, 3]
    assert proof.ok and proof.remnants == 0


def test_the_config_is_validated_like_the_others(tmp_path):
    with pytest.raises(ConfigError, match="logplat.roll.idle.segments"):
        open_topic(tmp_path, "t", 1, logplat_roll_idle_segments="yes")
    assert not list(tmp_path.glob("t-*"))  # nothing written
