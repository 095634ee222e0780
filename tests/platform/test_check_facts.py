"""The record facts the compaction checks compare, read by the engine in Spark tasks: a digest of
every key's latest value that a lost or changed latest value moves and a removed superseded
record or an expired tombstone does not, duplicates in the cleaned range, and verification."""

from __future__ import annotations

from spark_jobs.reads import Digest, FactsTask, key_facts, read_key_facts, record_hash, summarize
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from tests.helpers.engine import append_each, open_topic


def _log(root, records):
    manager = open_topic(root, "t", 1, cleanup_policy="compact")
    append_each(manager.get_log("t", 0), [ProducerRecord(k, v, 1_000) for k, v in records])
    manager.close()


def _facts(root, ending=100, cleaned_end=0):
    with LogManager([root], read_only=True) as manager:
        configs = manager.topic_configs()
    return read_key_facts(FactsTask(str(root), "t", 0, ending, cleaned_end, 0, verify=True, broker_props={},
                                    configs=configs))[1]


def test_the_digest_follows_latest_values_only(tmp_path):
    _log(tmp_path / "a", [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", None)])
    _log(tmp_path / "b", [(b"b", b"1"), (b"a", b"2")])  # what a correct compaction keeps
    _log(tmp_path / "c", [(b"a", b"1"), (b"b", b"1")])  # a's latest value lost
    a, b, c = (_facts(tmp_path / d) for d in "abc")
    assert a.digest() == Digest(2, record_hash(b"b", b"1") ^ record_hash(b"a", b"2"))
    assert a.digest() == b.digest() != c.digest()
    assert a.verification is not None and a.verification.records == 4 and not a.verification.offset_problems
    # keys whose latest record lies below an offset are left out (retention's deleted segments)
    assert a.digest(from_offset=2) == Digest(1, record_hash(b"a", b"2"))


def test_records_from_the_end_on_are_not_read(tmp_path):
    _log(tmp_path, [(b"a", b"1"), (b"a", b"2")])
    assert _facts(tmp_path, ending=1).digest() == Digest(1, record_hash(b"a", b"1"))


def test_duplicates_are_counted_in_the_cleaned_range_only(tmp_path):
    _log(tmp_path, [(b"a", b"1"), (b"a", b"2"), (b"b", b"1"), (b"a", b"3"), (b"b", b"2")])
    facts = _facts(tmp_path, cleaned_end=3)
    assert (facts.duplicates.keys, facts.duplicates.records) == (1, 2)  # a twice below offset 3


def test_a_read_stopped_by_a_damaged_batch_says_so(tmp_path):
    _log(tmp_path, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # a record byte of the last batch: its CRC no longer matches
    segment.write_bytes(bytes(data))
    facts = _facts(tmp_path)
    assert facts.error is not None and "stored crc" in facts.error and list(facts.offsets) == [0, 1]
    assert f"file {segment}," in facts.error  # the segment file, as verify names it, not its directory
    assert summarize({0: facts})[0].error == facts.error


def test_an_index_a_writable_open_rebuilds_is_an_index_problem(tmp_path):
    """The checks sort ``verify``'s problems by the file each names: a missing or corrupt index
    was named by its ``.log`` and failed the offsets check instead of the indexes check."""
    _log(tmp_path, [(b"a", b"1"), (b"b", b"2")])
    (tmp_path / "t-0" / "00000000000000000000.timeindex").unlink()
    verification = _facts(tmp_path).verification
    assert verification is not None and not verification.offset_problems
    assert [p.split(": ")[0] for p in verification.index_problems] == [str(tmp_path / "t-0" / "00000000000000000000.timeindex")]


def test_spark_tasks_read_every_partition_asked_for(spark, tmp_path):
    manager = open_topic(tmp_path, "t", 3, cleanup_policy="compact")
    for p in range(3):
        append_each(manager.get_log("t", p), [ProducerRecord(b"k%d" % i, b"v", 1_000) for i in range(p + 1)])
    manager.close()
    facts = key_facts(spark, [str(tmp_path)], "t", {0: 10, 2: 10}, broker_props={}, verify=False)
    assert {p: d.digest.keys for p, d in summarize(facts).items()} == {0: 1, 2: 3}
    assert all(f.verification is None for f in facts.values())


def test_a_partition_outside_its_topic_s_metadata_log_dir_is_read_with_the_topic_s_config(spark, tmp_path):
    """A topic's metadata is in the first log dir, its partitions spread over all: a task opened
    only its partition's log dir and read a topic without metadata, so the latest values of a
    ``compaction.strategy=timestamp`` topic's partition in the second dir were judged by offset."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    with LogManager(dirs) as manager:
        manager.admin.create_topic("t", 2, {"cleanup.policy": "compact", "compaction.strategy": "timestamp"})
        for p in range(2):
            append_each(manager.get_log("t", p), [ProducerRecord(b"a", b"newer", 2_000), ProducerRecord(b"a", b"older", 1_000)])
    assert sorted(d.name for d in tmp_path.glob("d*/t-*")) == ["t-0", "t-1"] and (dirs[1] / "t-1").is_dir()
    facts = key_facts(spark, [str(d) for d in dirs], "t", {0: 10, 1: 10}, broker_props={}, verify=False)
    by_timestamp = Digest(1, record_hash(b"a", b"newer"))
    assert {p: f.digest for p, f in summarize(facts).items()} == {0: by_timestamp, 1: by_timestamp}
