"""``logctl`` over a tiered partition on the real S3 server: ``consume`` (and ``--as-of-version``),
``topic describe``, ``verify`` (catching a missing, a truncated and a damaged object and a
version naming ``../``) and ``dump --remote`` read it as one log across its tiers."""

from __future__ import annotations

import json

import pytest

from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import open_store
from storage_engine.remote.names import new_writer_id, version_name
from storage_engine.remote.partition import RemotePartition, wall_clock_ms
from storage_engine.remote.tiering import tier_partition
from storage_engine.remote.version import release_horizon_ms
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each, open_topic, records

N = 60


@pytest.fixture
def root(remote_env, tmp_path):
    """Log dirs holding ``t`` (tiered, local copies partly released) and ``u``, the same 60
    records untiered."""
    root = tmp_path / "logs"
    manager = open_topic(root, "t", segment_bytes=400, index_interval_bytes=1, remote_storage_enable="true",
                         local_retention_bytes=900)
    manager.admin.create_topic("u", 1, {"segment.bytes": "400", "index.interval.bytes": "1"})
    recs = records(N, ts=10_000)
    append_each(manager.get_log("t", 0), recs)
    append_each(manager.get_log("u", 0), recs)
    log = manager.get_log("t", 0)
    tier_partition(log, RemotePartition(open_store(), "t", 0), now_ms=100_000)
    assert 0 < log.log_start_offset
    manager.close()
    return root


@pytest.fixture
def logctl(root, monkeypatch, capsys):
    return lambda *args: run_logctl(root, monkeypatch, capsys, *args)


def _rp() -> RemotePartition:
    return RemotePartition(open_store(), "t", 0)


def test_consume_reads_the_tiered_partition_as_the_untiered_one(logctl) -> None:
    tier_end = _rp().latest().end_offset
    for start in ([], ["--from-offset", "5"], ["--from-offset", str(tier_end)], ["--from-timestamp", "10007"],
                  ["--from-offset", "3", "--max-records", str(tier_end)]):
        code, tiered, err = logctl("consume", "t", "--partition", "0", *start)
        assert code == 0, err
        assert tiered == logctl("consume", "u", "--partition", "0", *start)[1] != "", start


def test_consume_as_of_an_older_version(logctl) -> None:
    rp = _rp()
    v1 = rp.latest()
    drop = v1.segments[0]
    rp.commit(v1.successor(writer=new_writer_id(), operation="retention", committed_ms=wall_clock_ms(),
                           release_horizon_ms=release_horizon_ms_of_default(), summary={},
                           segments=v1.segments[1:], log_start_offset=drop.end_offset))
    latest = [json.loads(x)["offset"] for x in logctl("consume", "t", "--partition", "0")[1].splitlines()]
    assert latest == list(range(drop.end_offset, N))
    code, out, err = logctl("consume", "t", "--partition", "0", "--as-of-version", "1")
    assert code == 0, err
    assert [json.loads(x)["offset"] for x in out.splitlines()] == list(range(v1.end_offset))
    code, _, err = logctl("consume", "t", "--partition", "0", "--as-of-version", "7")
    assert code == 1 and "has no version 7" in err and err.count("\n") == 1


def release_horizon_ms_of_default() -> int:
    from storage_engine.config.topic import LogConfig

    return release_horizon_ms(LogConfig())


def test_describe_shows_the_remote_tier(logctl) -> None:
    v = _rp().latest()
    code, out, err = logctl("topic", "describe", "t", "--json")
    assert code == 0, err
    part = json.loads(out)["partitions"][0]
    assert part["log_start_offset"] == 0 and part["log_end_offset"] == N and part["local_log_start_offset"] > 0
    assert part["remote"] == {"version": 1, "log_start_offset": 0, "end_offset": v.end_offset,
                              "size_bytes": v.size_bytes, "segments": len(v.segments)}
    text = logctl("topic", "describe", "t")[1]
    assert f"RemoteVersion: 1\tRemoteLogStartOffset: 0\tRemoteEndOffset: {v.end_offset}\t" in text
    assert "Remote" not in logctl("topic", "describe", "u")[1]


def test_verify_counts_the_logs_records_not_the_shadowed_local_copies(logctl, root) -> None:
    """Local copies below the tier's end are verified but are not the log's records: the count
    (what the checks record as ``dagster/row_count``) is the untiered copy's."""
    with LogManager([root], read_only=True) as manager:
        local = manager.get_log("t", 0)
        assert local.log_start_offset < _rp().latest().end_offset  # some copies are still shadowed
    tiered, untiered = (json.loads(logctl("verify", "--topic", t, "--json")[1]) for t in ("t", "u"))
    assert tiered["partitions"][0]["records"] == untiered["partitions"][0]["records"] == N


def test_verify_checks_the_remote_tier(logctl) -> None:
    code, out, err = logctl("verify", "--topic", "t")
    assert code == 0, out + err
    assert out.startswith("t-0: OK: ") and "(remote version 1)" in out
    rp = _rp()
    v = rp.latest()
    first, second, third = v.segments[:3]
    rp.store.delete(rp.name(first.index))  # missing
    data = rp.read(second.log)  # truncated
    rp.store.delete(rp.name(second.log))
    rp.store.put_new(rp.name(second.log), data[:-7])
    data = bytearray(rp.read(third.log))  # a damaged batch: its last byte, inside the CRC
    data[-1] ^= 0xFF
    rp.store.delete(rp.name(third.log))
    rp.store.put_new(rp.name(third.log), bytes(data))
    code, out, _ = logctl("verify", "--topic", "t")
    assert code == 1
    assert f"{first.index}: named by version 1 but not in the store" in out
    assert f"{second.log}: {second.size_bytes - 7} bytes, but version 1 records {second.size_bytes}" in out
    assert third.log in out and "CRC" in out.upper()
    assert "t-0: 3 problem(s)" in out


def test_verify_refuses_a_version_naming_an_object_outside_its_prefix(logctl) -> None:
    rp = _rp()
    v = rp.latest()
    body = json.loads(v.encode())
    body["version"] = 2
    body["released"] = []
    body["segments"][0]["log"] = "data/../../u-0/00000000000000000000.log"
    rp.store.put_new(rp.name(version_name(2)), json.dumps(body).encode())
    code, out, _ = logctl("verify", "--topic", "t")
    assert code == 1 and "the remote tier's latest version cannot be read" in out and "../" in out
    before = dict(rp.store.requests)  # the process's one store, which the command uses too
    code, _, err = logctl("consume", "t", "--partition", "0")
    assert code == 1 and "is not a data object of this partition" in err and err.count("\n") == 1
    after = rp.store.requests
    grown = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    assert grown == {"LIST": 1, "GET": 1}  # the version only: no object it names was read


def test_dump_remote_segments(logctl, root) -> None:
    v = _rp().latest()
    seg = v.segments[1]
    code, out, err = logctl("dump", "--remote", "t", "--partition", "0", "--segment", str(seg.base_offset))
    assert code == 0, err
    assert out.startswith("Dumping s3://") and seg.log in out
    assert f"baseOffset: {seg.base_offset} lastOffset: {seg.base_offset}" in out and "isvalid: true" in out
    local = logctl("dump", str(root / "u-0" / f"{seg.base_offset:020d}.log"))[1]
    assert out.split("\n", 1)[1] == local.split("\n", 1)[1]  # the batches as kafka-dump-log shows the file
    data = json.loads(logctl("dump", "--remote", "t", "--partition", "0", "--json")[1])
    assert [d["base_offset"] for d in data] == [s.base_offset for s in v.segments]
    code, _, err = logctl("dump", "--remote", "t", "--partition", "0", "--segment", "1")
    assert code == 1 and "no remote segment at base offset 1" in err
    code, _, err = logctl("dump", "--remote", "t")
    assert code == 1 and "--partition" in err


def test_erasure_report_reads_across_the_tiers(remote_env, tmp_path, monkeypatch, capsys) -> None:
    root = tmp_path / "c"
    manager = open_topic(root, "c", segment_bytes=400, cleanup_policy="compact", max_compaction_lag_ms=1000,
                         remote_storage_enable="true", local_retention_bytes=900)
    manager.admin.create_topic("d", 1, {"segment.bytes": "400", "cleanup.policy": "compact",
                                        "max.compaction.lag.ms": "1000"})
    recs = records(N, ts=10_000, keys=7)
    append_each(manager.get_log("c", 0), recs)
    append_each(manager.get_log("d", 0), recs)
    log = manager.get_log("c", 0)
    tier_partition(log, RemotePartition(open_store(), "c", 0), now_ms=100_000)
    assert log.log_start_offset > 0  # most records are only remote now
    manager.close()
    reports = {}
    for topic in ("c", "d"):
        code, out, err = run_logctl(root, monkeypatch, capsys, "erasure-report", "--topic", topic, "--key", "k3",
                                    "--now-ms", "100000", "--json")
        assert code == 1, err  # nothing was compacted: the superseded records are overdue
        reports[topic] = json.loads(out)["partitions"][0]
    tiered, plain = reports["c"], reports["d"]
    assert tiered["records_read"] == plain["records_read"] == N
    assert (tiered["remnants"], tiered["oldest"]) == (plain["remnants"], plain["oldest"])
    assert tiered["key"]["values"] == plain["key"]["values"] == list(range(3, N, 7))
