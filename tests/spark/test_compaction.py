"""The Spark compaction and retention jobs against the engine's local cleaner and retention.

Differential: the same logs, copied, compacted by the local cleaner and by the Spark job with
the same ``now_ms``, must be identical on disk (every segment's bytes) and in what the reports
count. Plus the job's behaviour when other processes change the logs under it, and its CLI.
"""

from __future__ import annotations

import filecmp
import json
import os
import random
import shutil
import struct
import threading
from pathlib import Path

import pytest

from spark_jobs.compaction import CompactionJob, compact_partitions
from spark_jobs.retention import retention_partitions
from storage_engine.cleaner import LogCleaner
from storage_engine.errors import LogError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.checkpoint import read_checkpoint
from storage_engine.logdir.manager import LogManager
from storage_engine.outcomes import CHANGED, COMPACTED, DELETED, NOTHING, PLANNED, SKIPPED
from storage_engine.record import CompressionType
from tests.helpers.cleaner import NOW, data_batch, marker, raw_log
from tests.helpers.engine import flip_last_byte, open_topic

CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD]
REPORT_FIELDS = [
    "new_checkpoint", "first_dirty_offset", "first_uncleanable_offset", "bytes_read", "bytes_written", "records_read",
    "records_written", "duplicates_removed", "tombstones_removed", "unkeyed_removed", "aborted_records_removed",
    "markers_removed", "empty_batches_kept", "delete_horizons_stamped", "segments_before", "segments_after",
    "segments_written", "dirty_ratio_before", "dirty_ratio_after", "distinct_keys",
]


def random_topic(root: Path, topic: str, seed: int, partitions: int = 1, strategy: str = "offset") -> None:
    """A compacted topic of random batches: few or many keys, tombstones, every
    codec, random batch and segment sizes, a few headers; under a version ``strategy`` (KIP-280)
    out-of-order timestamps and ``ver`` header versions, some missing or unparsable."""
    rnd = random.Random(seed)
    m = open_topic(root, topic, partitions, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01",
                   segment_bytes=str(rnd.choice([1500, 3000, 20000])), file_delete_delay_ms="0",
                   delete_retention_ms=str(rnd.choice([0, 50_000, 10**9])), compaction_strategy=strategy,
                   compaction_strategy_header="ver" if strategy == "header" else "")
    nkeys = rnd.choice([3, 40, 400])
    for p in range(partitions):
        log = m.get_log(topic, p)
        for b in range(rnd.randrange(20, 80)):
            recs = []
            for _ in range(rnd.randrange(1, 12)):
                key = f"key-{rnd.randrange(nkeys)}".encode()
                value = None if rnd.random() < 0.15 else os.urandom(rnd.randrange(0, 60))
                hdrs = (("h", b"%d" % b),) if rnd.random() < 0.2 else ()
                ts = NOW - 100_000 + b
                if strategy != "offset":
                    ts -= rnd.randrange(50)
                    hdrs += rnd.choice([(("ver", struct.pack(">q", rnd.randrange(-5, 20))),), (), (("ver", b"7"),)])
                recs.append(ProducerRecord(key, value, ts, hdrs))
            log.append(recs, compression=rnd.choice(CODECS), now=NOW - 100_000 + b)
    m.close()


def assert_same_dirs(a: Path, b: Path) -> None:
    for part in sorted(p.name for p in a.iterdir() if p.is_dir() and not p.name.startswith(".")):
        names_a = sorted(n for n in os.listdir(a / part) if n[:1].isdigit())
        names_b = sorted(n for n in os.listdir(b / part) if n[:1].isdigit())
        assert names_a == names_b, part
        for n in names_a:
            if n.endswith((".log", ".index", ".timeindex", ".txnindex")):
                assert filecmp.cmp(a / part / n, b / part / n, shallow=False), f"{part}/{n} differs"
    for cp in ("cleaner-offset-checkpoint", "log-start-offset-checkpoint"):
        assert checkpoint_of(a / cp) == checkpoint_of(b / cp), cp


def checkpoint_of(path: Path) -> dict:
    return read_checkpoint(path) if path.exists() else {}


def local_reports(root: Path, now: int) -> dict:
    with LogManager([root]) as m:
        return {(r.topic, r.partition): r.to_dict() for r in LogCleaner(m).compact_due(now_ms=now)}


@pytest.mark.parametrize("split_bytes,spans", [(None, None), (0, None), (0, 3), (0, 64)],
                         ids=["whole", "split", "split-3-spans", "split-span-per-group"])
def test_spark_job_equals_the_local_cleaner_byte_for_byte_on_random_logs(spark, tmp_path, split_bytes, spans):
    """Whole partitions are cleaned by the engine inside tasks; split ones by the job's two
    stages, each span with the keys of its own and every later span: all give the local
    cleaner's bytes, however many spans a partition is cut into."""
    local, remote = tmp_path / "local", tmp_path / "spark"
    for seed in range(6):
        random_topic(local, f"r{seed}", seed, partitions=1 + seed % 2)
    shutil.copytree(local, remote)

    for now in (NOW, NOW + 60_000, NOW + 10**10):  # a second and third round remove tombstones past horizons
        expected = local_reports(local, now)
        result = compact_partitions(spark, [remote], now_ms=now, split_bytes=split_bytes, spans=spans)
        got = {(o.topic, o.partition): o.to_dict() for o in result.outcomes}
        # the local cleaner reports only partitions it picked; the job reports every one it considered
        assert set(expected) <= set(got)
        assert all(got[tp]["status"] == SKIPPED for tp in set(got) - set(expected))
        for tp, rep in expected.items():
            assert got[tp]["engine"] == "spark"
            if rep["skipped"]:
                assert got[tp]["status"] == SKIPPED
                continue
            assert got[tp]["status"] == COMPACTED, got[tp]["reason"]
            assert {f: got[tp][f] for f in REPORT_FIELDS} == {f: rep[f] for f in REPORT_FIELDS}, tp
        assert_same_dirs(local, remote)


@pytest.mark.parametrize("strategy", ["timestamp", "header"])
def test_every_compaction_strategy_equals_the_local_cleaner_byte_for_byte(spark, tmp_path, strategy):
    """KIP-280 strategies: the job's output is the local cleaner's, byte for byte, over rounds that
    remove tombstones; asked to split, it still cleans such partitions whole (their recopy must
    run in offset order)."""
    local, remote = tmp_path / "local", tmp_path / "spark"
    for seed in range(4):
        random_topic(local, f"r{seed}", 100 + seed, partitions=1 + seed % 2, strategy=strategy)
    shutil.copytree(local, remote)
    fields = REPORT_FIELDS + ["records_without_version"]
    without_version = 0
    for now in (NOW, NOW + 60_000, NOW + 10**10):
        expected = local_reports(local, now)
        result = compact_partitions(spark, [remote], now_ms=now, split_bytes=0)
        got = {(o.topic, o.partition): o.to_dict() for o in result.outcomes}
        for tp, rep in expected.items():
            if not rep["skipped"]:
                assert got[tp]["status"] == COMPACTED, got[tp]["reason"]
                assert {f: got[tp][f] for f in fields} == {f: rep[f] for f in fields}, tp
                without_version += rep["records_without_version"]
        assert_same_dirs(local, remote)
    assert (without_version > 0) == (strategy == "header")


@pytest.mark.parametrize("strategy", ["offset", "timestamp"])
def test_transactions_and_producer_state_follow_the_local_cleaner(spark, tmp_path, strategy):
    """Aborted and committed transactions spanning segments that land in different groups: each
    group task starts from the transaction state the header replay computed."""
    # Timestamps out of order: under ``timestamp`` the aborted batch (the newest timestamps)
    # must still go, and a@4 beats the later a@8.
    segs = [
        [data_batch(0, [("a", "1"), ("b", "1")], pid=7, epoch=0, seq=0, transactional=True, ts=NOW + 500),
         data_batch(2, [("c", "1")])],
        [marker(3, 7, 0, commit=False), data_batch(4, [("a", "2")], pid=8, epoch=0, seq=0, transactional=True)],
        [data_batch(5, [("b", "2")], pid=7, epoch=0, seq=2, transactional=True), marker(6, 8, 0, commit=True)],
        [marker(7, 7, 0, commit=True), data_batch(8, [("a", "3"), ("c", None)], ts=NOW - 100)],
        [data_batch(10, [("z", "1")])],
    ]
    raw_log(tmp_path / "local", segs, segment_bytes="200", compaction_strategy=strategy).close()
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    expected = local_reports(tmp_path / "local", NOW)
    result = compact_partitions(spark, [tmp_path / "spark"], now_ms=NOW, split_bytes=0)
    assert [o.status for o in result.outcomes] == [COMPACTED], result.outcomes[0].reason
    assert len(result.outcomes[0].rounds[0]["groups"]) > 1  # really several group tasks
    got = result.outcomes[0].to_dict()
    assert got["aborted_records_removed"] == 2 and got["markers_removed"] == 0  # markers stay until their horizon
    assert {f: got[f] for f in REPORT_FIELDS} == {f: expected[("t", 0)][f] for f in REPORT_FIELDS}
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")
    assert list((tmp_path / "spark" / "t-0").glob("*.txnindex"))  # the kept ABORT marker's entry, as the local cleaner's
    kept = {"offset": [(5, b"b", b"2"), (8, b"a", b"3"), (9, b"c", None), (10, b"z", b"1")],
            # c@2 outlives the later tombstone c@9, which stays as the newest record mapped
            "timestamp": [(2, b"c", b"1"), (4, b"a", b"2"), (5, b"b", b"2"), (9, b"c", None), (10, b"z", b"1")]}
    assert read_all(tmp_path / "spark", "t") == kept[strategy]


def test_one_large_partition_is_spread_over_many_tasks(spark, tmp_path):
    # keys 0-99, then 0-59 again: the later half of the log holds 80 of the 100 keys
    m = open_topic(tmp_path / "local", "big", 1, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01",
                   segment_bytes="1500")
    log = m.get_log("big", 0)
    for b in range(40):
        log.append([ProducerRecord(b"key-%d" % ((b * 4 + i) % 100), b"v" * 20, NOW) for i in range(4)], now=NOW)
    m.close()
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    with LogManager([tmp_path / "spark"]) as m:
        with CompactionJob(spark, m, now_ms=NOW, force=True, split_bytes=0) as job:
            job.plan([("big", 0)])
            (plan,) = job.planned
            assert plan.groups > 1 and not job.whole
            job.execute()
            rows = job._rows[0]
            assert len(rows) == plan.groups  # one recopy task result per group
            (outcome,) = job.commit().outcomes
    assert outcome.status == COMPACTED
    (expected,) = local_reports(tmp_path / "local", NOW).values()
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")
    # two spans (the session's task slots): the first recopies with every key of the dirty range,
    # the last with its own only
    map_keys = [rows[g]["map_keys"] for g in range(plan.groups)]
    assert map_keys[0] == outcome.to_dict()["map_entries"] == expected["map_entries"] == 100
    assert sorted(set(map_keys)) == [map_keys[-1], 100] and 60 <= map_keys[-1] < 100


def test_large_groups_index_like_the_local_cleaner(spark, tmp_path):
    """Groups writing more than the cleaner's I/O buffer: index entries fall at the same chunks."""
    m = open_topic(tmp_path / "local", "large", 1, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01",
                   segment_bytes=str(1 << 20))
    log = m.get_log("large", 0)
    for b in range(400):
        log.append([ProducerRecord(b"key-%d" % ((b * 4 + i) % 900), os.urandom(1000), NOW) for i in range(4)], now=NOW)
    m.close()
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    local_reports(tmp_path / "local", NOW)
    (outcome,) = compact_partitions(spark, [tmp_path / "spark"], now_ms=NOW, split_bytes=0).outcomes
    assert outcome.status == COMPACTED and outcome.stats.bytes_written > 512 * 1024
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")


@pytest.mark.parametrize("split_bytes", [None, 0], ids=["whole", "split"])
def test_each_partition_reports_its_own_time_not_the_jobs(spark, tmp_path, split_bytes):
    """Partitions of one job share its wall time; each reports the seconds of its own work (its
    task; or its planning, key and recopy tasks and commit). The small partition is planned
    first, so a report timed from its planning to its commit would span the whole job."""
    m = open_topic(tmp_path, "t", 2, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01",
                   segment_bytes=str(64 * 1024))
    for p, batches in ((0, 3), (1, 300)):
        log = m.get_log("t", p)
        for b in range(batches):
            log.append([ProducerRecord(b"key-%d" % ((b * 8 + i) % 500), os.urandom(200), NOW) for i in range(8)],
                       now=NOW)
        log.roll()
    m.close()
    result = compact_partitions(spark, [tmp_path], now_ms=NOW, force=True, split_bytes=split_bytes)
    small, large = (o.to_dict() for o in result.outcomes)
    assert small["status"] == large["status"] == COMPACTED
    for report in (small, large):
        assert report["index_s"] > 0 and report["clean_s"] > 0  # measured in the tasks
        assert report["index_s"] + report["clean_s"] <= report["duration_s"] < result.duration_s
    assert small["duration_s"] < large["duration_s"]


def read_all(root: Path, topic: str, partition: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    with LogManager([root], read_only=True) as m:
        log = m.get_log(topic, partition)
        return [(r.offset, r.key, r.value) for r in log.read(log.log_start_offset, max_records=10**9, max_bytes=1 << 26)]


def latest(records) -> dict:
    out = {}
    for off, k, v in records:
        if k is not None:
            out[k] = (off, v)
    return out


@pytest.mark.parametrize("split_bytes", [None, 0], ids=["whole", "split"])
def test_a_writer_appending_during_the_job_loses_nothing(spark, tmp_path, split_bytes):
    random_topic(tmp_path, "w", 0)
    before = read_all(tmp_path, "w")
    appended = []
    stop = threading.Event()

    def writer() -> None:
        with LogManager([tmp_path]) as m:
            log = m.get_log("w", 0)
            i = 0
            while not stop.is_set() or i < 20:
                info = log.append([ProducerRecord(b"live-%d" % (i % 7), b"v%d" % i, NOW)], now=NOW)
                appended.append((info.first_offset, b"live-%d" % (i % 7), b"v%d" % i))
                i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        result = compact_partitions(spark, [tmp_path], [("w", 0)], now_ms=NOW, force=True, split_bytes=split_bytes)
    finally:
        stop.set()
        t.join()
    assert result.outcomes[0].status == COMPACTED, result.outcomes[0].reason
    after = read_all(tmp_path, "w")
    offsets = [r[0] for r in after]
    assert offsets == sorted(set(offsets))
    # every record appended during the job is there, unchanged (the active segment is never cleaned)
    after_by_offset = {r[0]: r for r in after}
    for rec in appended:
        assert after_by_offset.get(rec[0]) == rec or latest(after)[rec[1]][0] > rec[0]
    assert latest(after) == latest(before + appended)


def test_retention_deleting_a_planned_segment_skips_the_partition_and_loses_nothing(spark, tmp_path):
    random_topic(tmp_path, "d", 3, partitions=2)
    with LogManager([tmp_path]) as m:
        with CompactionJob(spark, m, now_ms=NOW, force=True, split_bytes=0) as job:
            job.plan()
            # another process deletes the first segment of d-0 between plan and commit
            with LogManager([tmp_path]) as other:
                log = other.get_log("d", 0)
                second = log.segments[1].base_offset
                log.delete_records(second)
                from storage_engine.log.retention import apply_retention

                assert apply_retention(log, None, NOW).deleted_segments == [0]
            after_retention = read_all(tmp_path, "d", 0)
            job.execute()
            outcomes = {o.partition: o for o in job.commit().outcomes}
    assert outcomes[0].status == CHANGED and "nothing" in outcomes[0].skipped
    assert outcomes[1].status == COMPACTED  # the other partition of the same job is unaffected
    assert read_all(tmp_path, "d", 0) == after_retention
    leftovers = [n for n in os.listdir(tmp_path / "d-0") if n.endswith((".cleaning", ".cleaned", ".swap"))
                 or n.startswith(".logplat-staging")]
    assert leftovers == []


@pytest.mark.parametrize("split_bytes", [None, 0], ids=["whole", "split"])
def test_a_partition_another_cleaner_holds_is_skipped(spark, tmp_path, split_bytes):
    random_topic(tmp_path, "b", 1)
    from storage_engine.cleaner.staging import CleanerLock

    with CleanerLock(tmp_path / "b-0"):
        result = compact_partitions(spark, [tmp_path], now_ms=NOW, force=True, split_bytes=split_bytes)
    assert [o.status for o in result.outcomes] == [SKIPPED]
    assert "another process" in result.outcomes[0].reason


def retention_topic(root: Path, topic: str, partitions: int) -> None:
    m = open_topic(root, topic, partitions, retention_ms="1000", segment_bytes="1500", file_delete_delay_ms="0")
    for p in range(partitions):
        log = m.get_log(topic, p)
        for b in range(p % 4 * 6):
            log.append([ProducerRecord(b"k", b"x" * 100, 1000 + b)] * 5, now=1000 + b)
    m.close()


def test_retention_job_equals_the_engine_on_many_partitions(spark, tmp_path):
    retention_topic(tmp_path / "local", "ret", 120)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    now = 100_000
    dry = retention_partitions(spark, [tmp_path / "spark"], now_ms=now, dry_run=True)
    with LogManager([tmp_path / "local"]) as m:
        plans = {(p.topic, p.partition): p for p in m.retention.plans(now_ms=now)}
        assert {(o.topic, o.partition): o.plan.to_dict() for o in dry.outcomes} == {k: p.to_dict() for k, p in plans.items()}
        assert {o.status for o in dry.outcomes} == {PLANNED, NOTHING}
        applied = {(r.plan.topic, r.plan.partition): r for r in m.retention.apply(list(plans.values()), now_ms=now)}
    result = retention_partitions(spark, [tmp_path / "spark"], now_ms=now)
    assert result.bytes_freed == sum(r.bytes_freed for r in applied.values()) > 0
    for o in result.outcomes:
        r = applied.get((o.topic, o.partition))
        if r is None or not r.deleted_segments:
            assert o.status == NOTHING
        else:
            assert (o.status, o.deleted_segments, o.log_start_offset_after) == (
                DELETED, r.deleted_segments, r.new_log_start_offset)
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")


def test_retention_job_deletes_below_a_compacted_topics_log_start_as_the_engine_does(spark, tmp_path):
    """The job chose only topics whose policy includes ``delete``, so a compacted topic's
    segments below a ``delete-records`` log start stayed, which the local engine (and Kafka's
    ``deleteLogStartOffsetBreachedSegments``, for every policy) deletes."""
    m = open_topic(tmp_path / "local", "cmp", 1, cleanup_policy="compact", segment_bytes="1500")
    log = m.get_log("cmp", 0)
    for b in range(18):
        log.append([ProducerRecord(b"k%d" % b, b"x" * 100, 1000 + b)] * 5, now=1000 + b)
    bases = [s.base_offset for s in log.segments]
    log.delete_records(bases[2] + 1)
    m.close()
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    with LogManager([tmp_path / "local"]) as m:
        applied = m.retention.apply(m.retention.plans(now_ms=NOW), now_ms=NOW)
    assert [r.deleted_segments for r in applied] == [bases[:2]]
    result = retention_partitions(spark, [tmp_path / "spark"], now_ms=NOW)
    assert [(o.topic, o.status, o.deleted_segments) for o in result.outcomes] == [("cmp", DELETED, bases[:2])]
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")


def test_retention_job_dry_run_after_an_unclean_shutdown_plans_as_the_engine_does(spark, tmp_path):
    """No writer since a crash: the next writable open cuts the log at the batch failing its CRC.
    The job's tasks planned from the files' metadata, the segments recovery deletes included,
    where the engine's dry run plans from the cut (``LogManager.planning_stats``)."""
    m = open_topic(tmp_path, "r", 1, retention_ms="-1", retention_bytes="50", segment_bytes="300")
    for b in range(12):
        m.get_log("r", 0).append([ProducerRecord(b"k", b"x" * 20, 1000 + b)], now=1000)
    m.close()
    part = tmp_path / "r-0"
    bases = sorted(int(p.name[:20]) for p in part.glob("*.log"))
    assert len(bases) >= 4
    (tmp_path / ".kafka_cleanshutdown").unlink()
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\nr 0 0\n")
    flip_last_byte(part / f"{bases[1]:020d}.log", 1)
    with LogManager([tmp_path], read_only=True) as m:
        [local] = m.retention.plans(now_ms=NOW)
    dry = retention_partitions(spark, [tmp_path], now_ms=NOW, dry_run=True)
    assert [o.plan.to_dict() for o in dry.outcomes] == [local.to_dict()]
    assert local.deleted_bases == tuple(bases[:1])  # the cut log; its files alone would give bases[:3]


def test_logctl_engine_spark(spark, tmp_path, capsys):
    from spark_jobs.cli import main

    random_topic(tmp_path / "local", "c", 11)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    assert main(["--log-dirs", str(tmp_path / "spark"), "compact", "--engine", "spark", "--now-ms", str(NOW), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "spark" and out["partitions"][0]["engine"] == "spark"
    assert out["partitions"][0]["skipped"] is None and out["partitions"][0]["passes"] == 1
    local_reports(tmp_path / "local", NOW)
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")
    assert main(["--log-dirs", str(tmp_path / "spark"), "compact", "--engine", "spark", "--max-passes", "2"]) == 1
    assert "--engine local only" in capsys.readouterr().err
    assert main(["--log-dirs", str(tmp_path / "spark"), "retention", "--engine", "spark", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "spark"
    assert spark.sparkContext._jsc is not None  # the CLI did not stop the shared session


def test_logctl_engine_spark_exits_1_naming_a_partition_its_job_could_not_clean(spark, tmp_path, capsys):
    """The job goes on past a damaged partition and cleans the others, but ``logctl`` printed
    the damaged one as skipped (compaction) or left it out (retention) and exited 0, where
    ``--engine local`` fails on it."""
    from spark_jobs.cli import main

    random_topic(tmp_path, "c", 11, partitions=2)
    first = min((tmp_path / "c-1").glob("*.log"))
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF  # inside the segment's last record: its batch's CRC no longer matches
    first.write_bytes(bytes(data))
    assert main(["--log-dirs", str(tmp_path), "compact", "--engine", "spark", "--now-ms", str(NOW), "--json"]) == 1
    by_partition = {p["partition"]: p for p in json.loads(capsys.readouterr().out)["partitions"]}
    assert by_partition[0]["failed"] is None and by_partition[0]["passes"] == 1  # the other partition is cleaned
    assert by_partition[1]["failed"].startswith("CorruptRecordError: Record is corrupt")
    assert main(["--log-dirs", str(tmp_path), "compact", "--engine", "spark", "--topic", "c", "--partition", "1"]) == 1
    assert capsys.readouterr().out.startswith("c-1: failed: CorruptRecordError: Record is corrupt")


def test_logctl_engine_spark_says_what_failed_on_stderr_and_nothing_of_the_jvm(tmp_path):
    """A partition the job could not clean was a line on stdout only, exit 1 and no ``error:``
    line, where ``--engine local`` fails with one; and every run started with the JVM's
    ``WARNING: Using incubator modules`` (Spark's launcher always adds that module)."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    random_topic(tmp_path, "c", 11, partitions=2)
    first = min((tmp_path / "c-1").glob("*.log"))
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF  # inside the segment's last record: its batch's CRC no longer matches
    first.write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-m", "spark_jobs.cli", "--log-dirs", str(tmp_path), "compact", "--engine",
                           "spark", "--now-ms", str(NOW)], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**os.environ, "LOGPLAT_SPARK_MASTER": "local[1]"})
    assert proc.returncode == 1
    line, = proc.stderr.splitlines()
    assert line.startswith("error: c-1: CorruptRecordError: Record is corrupt"), proc.stderr
    assert [out.split(":")[0] for out in proc.stdout.splitlines() if out[:1] != " "] == ["c-0", "c-1"]



@pytest.mark.parametrize("command", [["retention", "--now-ms", str(NOW + 10**9)], ["compact", "--now-ms", str(NOW)]])
def test_logctl_engine_spark_refuses_what_local_refuses_before_changing_anything(spark, tmp_path, capsys, command):
    """A partition the engine refuses (a misnamed segment file) refuses ``--engine local`` as a
    whole before it changes anything. The Spark jobs left that check to each task: retention
    deleted the other partitions' segments and failed that one, and compaction, which reads only
    compacted topics, cleaned and exited 0. Both engines now refuse the command alike."""
    from spark_jobs.cli import main

    random_topic(tmp_path / "local", "c", 11)
    with LogManager([tmp_path / "local"]) as manager:
        manager.admin.create_topic("f", 1, {"retention.ms": "1000"})
        manager.get_log("f", 0).append([ProducerRecord(b"k", b"v", NOW)], now=NOW)
    (tmp_path / "local" / "f-0" / "5.log").write_bytes(b"")
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    before = {p.relative_to(tmp_path / "spark"): p.read_bytes() for p in (tmp_path / "spark").rglob("*") if p.is_file()}
    for engine in ("local", "spark"):
        assert main(["--log-dirs", str(tmp_path / engine), *command, "--engine", engine]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "f-0/5.log: not a segment file name" in err and err.count("\n") == 1
    assert {p.relative_to(tmp_path / "spark"): p.read_bytes() for p in (tmp_path / "spark").rglob("*")
            if p.is_file() and not p.name.endswith(".lock")} == {p: b for p, b in before.items() if not p.name.endswith(".lock")}


def test_both_jobs_clean_partitions_outside_their_topic_s_metadata_log_dir(spark, tmp_path):
    """A topic's metadata is in the first log dir and its partitions spread over all: a task
    opened only its partitions' log dir, so a partition in the second one read as a topic
    without metadata (the broker defaults). The compaction failed it ("cleanup.policy=delete:
    only compacted topics are cleaned") and retention judged it by the default retention.ms.
    The second log dir is left unclean, so the first task there recovers every partition in
    it, of both topics: it needs every topic's config, not only those of its partitions."""
    rnd = random.Random(7)
    dirs = [tmp_path / "local" / "d1", tmp_path / "local" / "d2"]
    with LogManager(dirs) as m:
        m.admin.create_topic("c", 4, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                      "segment.bytes": "1500", "delete.retention.ms": "0"})
        m.admin.create_topic("r", 4, {"retention.ms": "50000", "segment.bytes": "1500"})
        for topic in ("c", "r"):
            for p in range(4):
                log = m.get_log(topic, p)
                for b in range(30):
                    log.append([ProducerRecord(f"k{rnd.randrange(5)}".encode(), os.urandom(40), NOW - 100_000 + b)],
                               now=NOW - 100_000 + b)
    assert [len(list(d.glob("c-*"))) for d in dirs] == [2, 2]
    (dirs[1] / ".kafka_cleanshutdown").unlink()
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    spark_dirs = [tmp_path / "spark" / d.name for d in dirs]
    with LogManager(dirs) as m:
        local = {(r.topic, r.partition): r for r in LogCleaner(m).compact_due(now_ms=NOW)}
        m.retention.apply(m.retention.plans("r", now_ms=NOW), now_ms=NOW)
    result = compact_partitions(spark, spark_dirs, [("c", p) for p in range(4)], now_ms=NOW)
    assert {(o.topic, o.partition): o.status for o in result.outcomes} == {k: COMPACTED for k in local}
    assert len(local) == 4
    retention = retention_partitions(spark, spark_dirs, now_ms=NOW)
    assert {o.status for o in retention.outcomes if o.topic == "r"} == {DELETED}
    for local_dir, spark_dir in zip(dirs, spark_dirs, strict=False):
        assert_same_dirs(local_dir, spark_dir)


def test_both_jobs_roll_forward_a_partition_the_metadata_counts_without_a_directory(spark, tmp_path, capsys):
    """A topic's metadata counts a partition whose directory is not there (a broker's log dir
    copied in part, a create killed part way). A read-only view refuses it by name; a writable
    open makes its directory again, empty, ending where its recovery point says (offsets never go
    backwards). The local engine's compaction and the Spark job's open both do, so both report it
    alike, and the two log dirs stay equal."""
    from spark_jobs.cli import main
    from spark_jobs.retention import retention_partitions

    random_topic(tmp_path / "local", "c", 3, partitions=2)
    shutil.rmtree(tmp_path / "local" / "c-1")
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    spark_root = str(tmp_path / "spark")
    with LogManager([spark_root], read_only=True) as manager:
        with pytest.raises(LogError, match="The directory c-1 of partition 1 of topic c is missing from log dirs"):
            retention_partitions(spark, partitions=[("c", 1)], now_ms=NOW, dry_run=True, manager=manager)
    local_reports(tmp_path / "local", NOW)
    assert main(["--log-dirs", spark_root, "compact", "--engine", "spark", "--now-ms", str(NOW), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    reported = [(p["partition"], p["skipped"], p["failed"], p["passes"]) for p in out["partitions"]]
    assert reported[0] == (0, None, None, 1)
    assert reported[1][0] == 1 and reported[1][1].startswith("nothing cleanable") and reported[1][2:] == (None, 0)
    assert (tmp_path / "spark" / "c-1").is_dir()
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")
    assert main(["--log-dirs", spark_root, "retention", "--engine", "spark", "--topic", "c", "--json"]) == 0
    assert [p["partition"] for p in json.loads(capsys.readouterr().out)["partitions"]] == [0, 1]


def test_retention_leaves_broker_logs_as_the_engine_does(spark, real_kafka, tmp_path):
    """Local retention opened every partition for writing, even with nothing to delete, and
    that open removed a broker's stale producer snapshots (``__consumer_offsets-29``), which
    the Spark job, opening only what it deletes from, left: the two engines' log dirs differed.
    Neither opens a partition it has nothing to delete from now; both sweep ``.deleted`` files."""
    src = real_kafka / "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions" / "kafka-data"
    shutil.copytree(src, tmp_path / "local")
    for p in [tmp_path / "local", *(tmp_path / "local").rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    now = 1_800_000_000_000
    with LogManager([tmp_path / "local"]) as m:
        m.retention.apply(m.retention.plans(now_ms=now), now_ms=now)
    retention_partitions(spark, [tmp_path / "spark"], now_ms=now)
    assert_same_dirs(tmp_path / "local", tmp_path / "spark")
    snapshots = sorted(p.name for p in (tmp_path / "local" / "__consumer_offsets-29").glob("*.snapshot"))
    assert snapshots == sorted(p.name for p in (src / "__consumer_offsets-29").glob("*.snapshot"))


def test_retention_dry_run_beside_a_topic_delete_left_half_done(spark, tmp_path):
    """A ``topic delete`` killed after its commit point leaves the topic marked deleting, its
    directories still there until a writable open finishes it. The dry run (read-only) listed
    them, and its tasks failed with a bare ``KeyError``: the driver's configs left the topic
    out. It plans them as the local dry run does."""
    import subprocess
    import sys

    from tests.helpers.crash import crash_env
    from tests.helpers.paths import REPO

    root = tmp_path / "logs"
    with open_topic(root, "t", 2) as m:
        m.admin.create_topic("u", 1)
    killed = subprocess.run([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), "topic", "delete",
                             "t"], cwd=REPO, env=crash_env("topic-delete-marked"))
    assert killed.returncode != 0 and (root / "t-0").is_dir()
    result = retention_partitions(spark, [root], now_ms=NOW, dry_run=True)
    with LogManager([root], read_only=True) as m:
        local = sorted((p.topic, p.partition) for p in m.retention.plans(now_ms=NOW))
    assert sorted((o.topic, o.partition) for o in result.outcomes) == local
    assert {o.status for o in result.outcomes} == {NOTHING}
