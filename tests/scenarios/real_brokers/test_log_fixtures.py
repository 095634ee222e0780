"""Directories written by real Kafka brokers load through the engine as Kafka would load them.

Counts come from ``INVENTORY.md`` beside the fixtures (parsed, not copied here). The fixture
folders are read-only and stay outside the repository: each test copies a log dir into a
temporary directory first, because loading may repair it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from storage_engine.logdir.manager import LogManager
from storage_engine.tools.verify import verify_log
from tests.helpers.engine import fixture_log_dirs


def _inventory(root: Path) -> dict[str, dict[str, str]]:
    rows = {}
    lines = (root / "INVENTORY.md").read_text().splitlines()
    header = None
    for line in lines:
        if not line.startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "file":
            header = cells
            continue
        if header and not set(cells[0]) <= set("-: "):
            rows[cells[0].strip("`")] = dict(zip(header, cells, strict=False))
    return rows


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def test_every_broker_log_loads_with_the_inventory_counts(real_kafka, tmp_path):
    inventory = _inventory(real_kafka)
    checked = 0
    for i, src in enumerate(fixture_log_dirs(real_kafka)):
        dst = _copy(src, tmp_path / f"d{i}")
        with LogManager([dst]) as m:
            for log in m.logs():
                report = verify_log(log)
                assert report.ok, report.problems
                for seg in log.segments:
                    rel = str((src / log.dir.name / seg.log_path.name).relative_to(real_kafka))
                    row = inventory.get(rel)
                    if row is None:
                        continue
                    seg_report = next(s for s in report.segments if s.file == seg.log_path.name)
                    assert seg_report.batches == int(row["batches"]), rel
                    assert seg_report.records == int(row["records"]), rel
                    first, last = (int(x) for x in row["offsets"].replace("–", "-").split("-"))
                    offsets = [r.offset for r in log.read(first, max_records=int(row["records"]) + 1, include_control=True)
                               if r.offset <= last]
                    assert offsets[0] == first and offsets[-1] == last, rel
                    checked += 1
    plain_logs = [k for k in inventory if re.search(r"/\d{20}\.log$", k)]
    assert checked == len(plain_logs)


def test_broker_indexes_agree_with_the_engine_lookups(real_kafka, tmp_path):
    """For every segment whose broker-written .index exists, lookups through it and through an
    index rebuilt by the engine find the same batch for every offset."""
    compared = 0
    for i, src in enumerate(fixture_log_dirs(real_kafka)):
        broker = _copy(src, tmp_path / f"b{i}")
        rebuilt = _copy(src, tmp_path / f"r{i}")
        for idx in rebuilt.rglob("*.index"):
            idx.unlink()
        with LogManager([broker]) as mb, LogManager([rebuilt]) as mr:
            for log in mb.logs():
                other = mr.get_log(log.topic, log.partition)
                for seg, seg2 in zip(log.segments, other.segments, strict=False):
                    if not (src / log.dir.name / seg.offset_index.path.name).exists() or seg.offset_index.entries == 0:
                        continue
                    last = seg.read_next_offset()
                    for off in range(seg.base_offset, last, max(1, (last - seg.base_offset) // 200)):
                        a, b = seg.translate_offset(off), seg2.translate_offset(off)
                        assert (a is None) == (b is None)
                        if a is not None:
                            assert a.position == b.position, (seg.log_path, off)
                    compared += 1
    assert compared >= 10


def test_the_directory_caught_mid_swap_resolves_as_kafka_does(real_kafka, tmp_path):
    src = real_kafka / "getachew015__kafka-broker" / "data" / "kafka"
    dst = _copy(src, tmp_path / "d")
    part = dst / "__consumer_offsets-13"
    assert (part / "00000000000000000000.log.swap").exists()
    with LogManager([dst]) as m:
        log = m.get_log("__consumer_offsets", 13)
        names = sorted(p.name for p in part.iterdir() if p.name[0].isdigit())
        # A .cleaned file beside the swap means the swap was still being prepared: Kafka drops
        # the .swap files at or above the smallest .cleaned offset and keeps the old segment.
        assert not [n for n in names if n.endswith((".swap", ".cleaned"))]
        assert "00000000000000000000.log" in names
        assert [r.offset for r in log.read(0, max_records=100)] == list(range(38))
        # copied without the broker's metadata: the settings the broker creates the topic with
        config = m.topic_config("__consumer_offsets")
        assert config.compact and not config.delete and config.segment_bytes == 100 * 1024 * 1024


def test_the_retention_deleted_segment_is_removed_and_offsets_do_not_go_back(real_kafka, tmp_path):
    src = real_kafka / "JobCollins__daas" / "kafka" / "data"
    dst = _copy(src, tmp_path / "d")
    with LogManager([dst]) as m:
        log = m.get_log("rappel_conso", 0)
        assert not list((dst / "rappel_conso-0").glob("*.deleted"))
        # Every segment is gone; the empty log restarts at the recovery point, not at 0.
        assert log.log_end_offset == 20907 == log.log_start_offset


def test_retention_leaves_a_broker_s_kraft_metadata_log_whole(real_kafka, tmp_path):
    """A broker's log dir holds KRaft's ``__cluster_metadata-0``, which Kafka trims only below
    its latest snapshot (here ``00000000000000007111-0000000001.checkpoint``), never by topic
    retention: the engine's retention deleted the whole log (offsets 0..18565) as an expired
    topic, losing every record past the snapshot. It is now read and never changed, and no
    command makes, configures or writes such a topic."""
    from storage_engine.errors import InvalidTopicError

    root = _copy(real_kafka / "renoagilsaputra__kafka" / "data", tmp_path / "data")
    metadata_log = root / "__cluster_metadata-0"
    before = {p.name: p.read_bytes() for p in metadata_log.iterdir() if p.suffix in (".log", ".checkpoint")}
    with LogManager([root]) as m:
        plans = m.retention.plans("__cluster_metadata", now_ms=2**62)
        assert [p.deletions for p in plans] == [()]
        m.retention.apply(m.retention.plans(now_ms=2**62), now_ms=2**62)
        for change in (lambda: m.admin.create_topic("__cluster_metadata", 1),
                       lambda: m.admin.alter_topic("__cluster_metadata", {"retention.ms": "1"}),
                       lambda: m.get_log("__cluster_metadata", 0).append([], now=0),
                       lambda: m.get_log("__cluster_metadata", 0).delete_records(10)):
            with pytest.raises(InvalidTopicError, match="KRaft's metadata log, not a topic"):
                change()
    assert {p.name: p.read_bytes() for p in metadata_log.iterdir() if p.suffix in (".log", ".checkpoint")} == before


@pytest.mark.parametrize("args", [
    ("produce", "__cluster_metadata", "--partition", "0"),
    ("delete-records", "__cluster_metadata", "--partition", "0", "--before-offset", "1"),
    ("compact", "--topic", "__cluster_metadata", "--partition", "0"),
    ("delete-records", "belajarkafka", "--partition", "0", "--before-offset", "999999"),
])
def test_a_refused_command_changes_no_file_of_a_broker_s_log_dir(real_kafka, tmp_path, monkeypatch, capsys, args):
    """These were refused only after the log dirs were opened for writing, which had already
    replaced the broker's clean-shutdown marker and removed the partition's stray producer
    snapshot (one the error then said was "never changed"). They are asked of a read-only view
    first (each command's ``precheck``)."""
    from tests.helpers.cli import run_logctl

    root = _copy(real_kafka / "renoagilsaputra__kafka" / "data", tmp_path / "data")
    before = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    code, out, err = run_logctl(root, monkeypatch, capsys, *args, stdin='{"value": "x"}\n')
    assert code == 1 and out == "" and err.startswith("error: ") and err.count("\n") == 1, err
    assert {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} == before
