"""Readers and sweepers meeting other processes' file changes.

Read-only commands (``verify``, ``consume``, the dry runs and the platform's stats) run beside
producers, retention and the ``.deleted`` sweeper. A stress of them (readers in a loop beside
producing, rolling, retention processes) found ``verify`` reporting a live writer's new segment
as missing its index, and the dry runs failing with a bare ``[Errno 2]`` on a file removed
between the directory listing and its ``stat``. Each case is made here deterministically: the
listing is taken, then the file goes, as the other process would make it go.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage_engine.log.retention import sweep_deleted_files
from storage_engine.log.stats import read_partition_stats
from storage_engine.logdir.manager import LogManager
from storage_engine.tools.verify import verify_partition
from tests.helpers.engine import TakenListing, open_topic, records

NOW = 1_000_000


def test_a_reader_finds_a_live_writers_new_segment_with_its_indexes(tmp_path):
    """A roll used to create only the ``.log``; the indexes came at the first index entry or the
    writer's close, so a reader meanwhile saw a segment to rebuild where nothing was wrong."""
    with open_topic(tmp_path, segment_bytes=1024) as writer:
        log = writer.get_log("t", 0)
        log.append(records(5, value_size=100), now=NOW)
        log.roll(NOW)
        log.append(records(2, start=5), now=NOW)
        active = log.active_segment
        assert all(p.exists() for p in active.index_paths()[:2])
        with LogManager([tmp_path], read_only=True) as reader:
            report = verify_partition(reader, "t", 0)
        assert report.problems == [] and report.log_end_offset == 7


def test_a_new_topics_first_segment_has_its_indexes_before_the_writer_closes(tmp_path):
    with open_topic(tmp_path) as writer:
        writer.get_log("t", 0).append(records(1), now=NOW)
        with LogManager([tmp_path], read_only=True) as reader:
            assert verify_partition(reader, "t", 0).problems == []


@pytest.fixture
def removed_after_listing(monkeypatch):
    """``os.scandir`` whose listing of ``directory`` is taken first, then the files named by
    ``gone`` are removed, before the caller sees the entries (another process winning)."""
    def arm(directory: Path, gone) -> None:
        real = os.scandir

        def scandir(path=".", *args):
            if Path(path) != directory:
                return real(path, *args)
            with real(path) as it:
                entries = list(it)
            for entry in entries:
                if gone(entry.name):
                    os.unlink(entry.path)
            return TakenListing(entries)

        monkeypatch.setattr(os, "scandir", scandir)
    return arm


def _log_with_pending_deletions(tmp_path: Path) -> Path:
    """A partition whose retention left its first segment's files as ``.deleted``."""
    with open_topic(tmp_path, retention_ms=100, file_delete_delay_ms=60_000) as m:
        log = m.get_log("t", 0)
        log.append(records(1, ts=1), now=NOW)
        log.roll(NOW)
        log.append(records(1, start=1, ts=NOW), now=NOW)
        [result] = m.retention.apply(m.retention.plans("t", now_ms=NOW), now_ms=NOW)
        assert result.deleted_segments == [0] and len(result.pending_files) == 3
        return log.dir


def test_stats_skip_files_removed_after_the_listing(tmp_path, removed_after_listing):
    """What ``retention --dry-run``, ``compact --dry-run`` and the platform's sensors plan from."""
    part = _log_with_pending_deletions(tmp_path)
    removed_after_listing(part, lambda name: name.endswith(".deleted"))
    stats = read_partition_stats(part)
    assert [s.base_offset for s in stats.segments] == [1] and stats.log_start_offset == 1


def test_two_sweepers_meeting_report_each_file_once(tmp_path, removed_after_listing):
    """The platform's sensor and a retention run sweep without the partition lock; the one that
    listed a file the other removed first reports nothing and does not fail."""
    part = _log_with_pending_deletions(tmp_path)
    names = sorted(n for n in os.listdir(part) if n.endswith(".deleted"))
    removed_after_listing(part, lambda name: name == names[0])
    removed = sweep_deleted_files(part, 0)
    assert sorted(name for name, _ in removed) == names[1:]
    assert not [n for n in os.listdir(part) if n.endswith(".deleted")]
