"""``logctl tier``, ``retention`` and ``delete-records`` on tiered topics, on the real S3 server:
rows per partition and tier, dry runs that write nothing, one-line errors that write nothing."""

from __future__ import annotations

import json

from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import open_store
from storage_engine.remote.partition import RemotePartition
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each, open_topic, records

NOW = 10**7


def build(root, partitions: int = 2, n: int = 30, **configs) -> list[int]:
    """A tiered topic ``t`` (segments of about 4 records) and an untiered ``u``; ``t``-0's segment bases."""
    manager = open_topic(root, partitions=partitions, segment_bytes=300, remote_storage_enable="true", **configs)
    manager.admin.create_topic("u", 1, {"segment.bytes": "300"})
    for p in range(partitions):
        append_each(manager.get_log("t", p), records(n))
    append_each(manager.get_log("u", 0), records(n))
    bases = [s.base_offset for s in manager.get_log("t", 0).segments]
    manager.close()
    return bases


def objects(p: int = 0) -> list[str]:
    rp = RemotePartition(open_store(), "t", p)
    return [o.name for o in rp.store.list(rp.prefix)]


def latest(p: int = 0):
    return RemotePartition(open_store(), "t", p).latest()


def test_tier_prints_a_row_per_partition_and_releases_local_copies(remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    bases = build(root, local_retention_ms=1000)
    code, out, err = run_logctl(root, monkeypatch, capsys, "tier", "--json", "--now-ms", str(NOW))
    assert code == 0, err
    rows = json.loads(out)["partitions"]
    assert [(r["topic"], r["partition"], r["status"], r["version"]) for r in rows] == [
        ("t", 0, "tiered", 1), ("t", 1, "tiered", 1)]  # the untiered topic has no row
    assert rows[0]["uploaded_segments"] == bases[:-1] and rows[0]["remote_end_offset"] == bases[-1]
    assert rows[0]["local_release"]["deleted_segments"] == bases[:-1]
    assert rows[0]["requests"]["requests_put"] == 3 * len(bases[:-1]) + 1 + 1  # objects, snapshot, the version
    code, out, _ = run_logctl(root, monkeypatch, capsys, "tier", "--topic", "t", "--now-ms", str(NOW))
    assert code == 0 and out.splitlines()[0].startswith(f"t-0: nothing: version 1, remote [0, {bases[-1]})")
    with LogManager([root], read_only=True) as m:
        assert m.get_log("t", 0).log_start_offset == bases[-1] and m.get_log("u", 0).log_start_offset == 0


def test_tier_refuses_an_untiered_topic_and_a_missing_or_bad_storage_writing_nothing(
        remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    build(root)
    code, _, err = run_logctl(root, monkeypatch, capsys, "tier", "--topic", "u")
    assert code == 1 and err == "error: topic u is not tiered: it has remote.storage.enable=false\n"
    for name, value, says in (("LOGPLAT_REMOTE_STORAGE", None, "LOGPLAT_REMOTE_STORAGE is not set"),
                              ("LOGPLAT_REMOTE_STORAGE", "s3://Bad_Bucket/x", "is not an S3 bucket name"),
                              ("AWS_ENDPOINT_URL", "http://127.0.0.1:9", "not reachable")):
        with monkeypatch.context() as env:
            env.delenv(name) if value is None else env.setenv(name, value)
            for argv in (["tier"], ["retention"], ["delete-records", "t", "--partition", "0", "--before-offset", "3"]):
                code, out, err = run_logctl(root, monkeypatch, capsys, *argv)
                assert code == 1 and out == "" and says in err and err.count("\n") == 1, (argv, err)
    assert objects() == []  # nothing reached the bucket
    with LogManager([root], read_only=True) as m:
        assert m.get_log("t", 0).log_start_offset == 0


def test_retention_by_time_rows_per_tier_and_a_dry_run_that_writes_nothing(remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    bases = build(root, partitions=1, retention_ms=1000)
    assert run_logctl(root, monkeypatch, capsys, "tier", "--now-ms", "0")[0] == 0  # tiered, no copy released
    stored = objects()
    # records are timestamped 1000 + offset: at this time the first two segments are past retention.ms
    now = 1000 + bases[2] - 1 + 1001
    code, out, err = run_logctl(root, monkeypatch, capsys, "retention", "--dry-run", "--json", "--now-ms", str(now))
    assert code == 0, err
    rows = json.loads(out)["partitions"]
    assert [(r["topic"], r.get("tier"), r.get("status")) for r in rows] == [
        ("t", "remote", "planned"), ("t", "local", "planned"), ("u", None, None)]  # u: retention.ms of 7 days
    assert [s["base_offset"] for s in rows[0]["segments_to_delete"]] == bases[:2]
    assert latest().version == 1 and objects() == stored  # no version, no object
    code, out, err = run_logctl(root, monkeypatch, capsys, "retention", "--now-ms", str(now))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("t-0 (remote tier): deleted 2 segment(s)") and "remote version 2" in lines[0]
    assert lines[1].startswith("t-0 (local tier): deleted 2 segment(s)") and lines[2] == "u-0: nothing to delete"
    v = latest()
    assert v.version == 2 and v.operation == "retention" and v.log_start_offset == bases[2]
    with LogManager([root], read_only=True) as m:
        assert m.get_log("t", 0).log_start_offset == bases[2]


def test_retention_bytes_judges_the_whole_log(remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    bases = build(root, partitions=1, n=40)
    assert run_logctl(root, monkeypatch, capsys, "tier", "--now-ms", "0")[0] == 0
    segments = latest().segments
    size = sum(s.size_bytes for s in segments)
    with LogManager([root]) as m:  # a limit the remote segments alone are within, the whole log is not
        m.admin.alter_topic("t", {"retention.bytes": str(size)})
        append_each(m.get_log("t", 0), records(20, start=40))  # local only: above the tier's end
    code, out, err = run_logctl(root, monkeypatch, capsys, "retention", "--topic", "t", "--json", "--now-ms", "0")
    assert code == 0, err
    remote = json.loads(out)["partitions"][0]
    assert remote["tier"] == "remote" and remote["status"] == "deleted"
    gone = remote["deleted_segments"]
    assert gone and gone == bases[:len(gone)] and latest().log_start_offset == bases[len(gone)]
    assert {d["reason"] for d in remote["segments_to_delete"]} == {"retention.bytes"}


def test_delete_records_advances_both_tiers(
        remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    bases = build(root, partitions=1)
    assert run_logctl(root, monkeypatch, capsys, "tier", "--now-ms", "0")[0] == 0
    target = bases[1] + 1
    code, out, err = run_logctl(root, monkeypatch, capsys, "delete-records", "t", "--partition", "0",
                                "--before-offset", str(target))
    assert code == 0, err
    assert out == f"partition: t-0\tlow_watermark: {target}\tremote_log_start_offset: {target}\tremote_version: 2\n"
    v = latest()
    assert v.operation == "delete-records" and v.log_start_offset == target and v.segments[0].base_offset == bases[1]
    with LogManager([root], read_only=True) as m:  # the local copy below the new start is gone (the load drops it)
        log = m.get_log("t", 0)
        assert log.log_start_offset == target and log.segments[0].base_offset == bases[1]


def test_delete_records_beyond_the_high_watermark_changes_neither_tier(remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    build(root, partitions=1)
    assert run_logctl(root, monkeypatch, capsys, "tier", "--now-ms", "0")[0] == 0
    code, _, err = run_logctl(root, monkeypatch, capsys, "delete-records", "t", "--partition", "0",
                              "--before-offset", "1000")
    assert code == 1 and "larger than the high watermark" in err and latest().version == 1


def test_delete_records_past_the_tier_end_starts_the_log_there_and_tiering_goes_on(
        remote_env, tmp_path, monkeypatch, capsys):
    """A delete-records past the remote tier's end, past a whole local segment above it: the
    log starts at the new low watermark (not at the emptied tier's end, where offsets would be
    in neither tier), the next tiering starts there, and no restore brings back the tier that
    ended below it (its next offsets are gone from the local log)."""
    root = tmp_path / "logs"
    build(root, partitions=1)
    assert run_logctl(root, monkeypatch, capsys, "tier", "--now-ms", "0")[0] == 0  # nothing released
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        append_each(log, records(12, start=30))
        above = [s.base_offset for s in log.segments if s.base_offset >= latest().end_offset]
    target = above[1] + 1  # the first local segment above the tier's end goes whole
    code, out, err = run_logctl(root, monkeypatch, capsys, "delete-records", "t", "--partition", "0",
                                "--before-offset", str(target))
    assert code == 0, err
    emptied = latest()
    assert emptied.segments == () and emptied.log_start_offset == emptied.end_offset == target
    code, out, err = run_logctl(root, monkeypatch, capsys, "consume", "t", "--partition", "0")
    assert code == 0, err
    assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(target, 42))
    code, out, err = run_logctl(root, monkeypatch, capsys, "verify")
    assert code == 0 and " OK" in out, out + err
    code, out, err = run_logctl(root, monkeypatch, capsys, "tier", "--json", "--now-ms", "0")
    assert code == 0, err
    row = json.loads(out)["partitions"][0]
    assert row["status"] == "tiered" and row["uploaded_segments"][0] == above[1]
    tiered = latest()
    assert tiered.log_start_offset == target and tiered.segments[0].base_offset == above[1]
    code, out, err = run_logctl(root, monkeypatch, capsys, "consume", "t", "--partition", "0")
    assert code == 0 and [json.loads(line)["offset"] for line in out.splitlines()] == list(range(target, 42))
    code, _, err = run_logctl(root, monkeypatch, capsys, "restore", "t", "--partition", "0", "--version", "1")
    assert code == 1 and "would lose or repeat offsets" in err and latest().version == tiered.version


def test_remote_storage_cannot_be_disabled_while_a_partition_has_a_remote_tier(remote_env, logctl) -> None:
    """Turning ``remote.storage.enable`` off would hide the remote records from every read."""
    assert logctl("topic", "create", "tt", "--partitions", "1", "--config", "remote.storage.enable=true",
                  "--config", "segment.bytes=200")[0] == 0
    lines = "\n".join(f'{{"key": "k{i}", "value": "v{i}"}}' for i in range(20))
    assert logctl("produce", "tt", "--partition", "0", "--batch-size", "1", stdin=lines)[0] == 0
    assert logctl("tier")[0] == 0
    code, out, err = logctl("topic", "alter", "tt", "--config", "remote.storage.enable=false")
    assert code == 1 and "has a remote tier" in err and len(err.strip().splitlines()) == 1
    code, out, _ = logctl("topic", "describe", "tt", "--json")
    assert code == 0 and json.loads(out)["configs"]["remote.storage.enable"] == "true"


def test_every_command_refuses_a_partition_tiered_at_another_location(remote_env, logctl, monkeypatch) -> None:
    """With LOGPLAT_REMOTE_STORAGE changed, no command starts a second tier, restores into it,
    lists it or sweeps it: each names the remembered location in one line."""
    assert logctl("topic", "create", "tt", "--partitions", "1", "--config", "remote.storage.enable=true",
                  "--config", "segment.bytes=200")[0] == 0
    lines = "\n".join(f'{{"key": "k{i}", "value": "v{i}"}}' for i in range(20))
    assert logctl("produce", "tt", "--partition", "0", "--batch-size", "1", stdin=lines)[0] == 0
    assert logctl("tier")[0] == 0
    monkeypatch.setenv("LOGPLAT_REMOTE_STORAGE", remote_env["LOGPLAT_REMOTE_STORAGE"] + "-moved")
    for args in (["tier", "--topic", "tt"], ["versions", "tt", "--partition", "0"], ["sweep", "--topic", "tt"],
                 ["restore", "tt", "--partition", "0", "--version", "1"], ["consume", "tt", "--partition", "0"],
                 ["retention", "--topic", "tt"], ["delete-records", "tt", "--partition", "0", "--before-offset", "1"]):
        code, out, err = logctl(*args)
        assert code == 1 and "is tiered at" in err, (args, out, err)
