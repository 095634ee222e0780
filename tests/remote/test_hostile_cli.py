"""A hostile user of the remote tier through ``logctl``, on the real S3 server: a bucket edited
by hand, a location the client cannot use, a store that stops answering, a topic name at the
longest legal length. Each bad case is one line on stderr, exit status 1, no traceback, and
nothing written: no new version, no new object, the log dirs as they were."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import obstore
import pytest

from storage_engine.remote.access import open_store
from storage_engine.remote.names import version_name
from storage_engine.remote.partition import RemotePartition
from tests.helpers.cli import run_logctl
from tests.helpers.engine import append_each, open_topic, records

NOW = 10**7


def build(root, topic: str = "t") -> None:
    """A tiered compacted ``topic`` (segments of about 4 records, 5 keys) and a compacted
    untiered ``u``, both dirty, ``topic``'s rolled segments tiered (version 1)."""
    manager = open_topic(root, topic, segment_bytes=300, remote_storage_enable="true", cleanup_policy="compact",
                         min_cleanable_dirty_ratio="0.01")
    manager.admin.create_topic("u", 1, {"segment.bytes": "300", "cleanup.policy": "compact",
                                        "min.cleanable.dirty.ratio": "0.01"})
    append_each(manager.get_log(topic, 0), records(40, keys=5))
    append_each(manager.get_log("u", 0), records(40, keys=5))
    manager.close()


def tier(root, monkeypatch, capsys, topic: str = "t") -> RemotePartition:
    code, _, err = run_logctl(root, monkeypatch, capsys, "tier", "--topic", topic, "--now-ms", str(NOW))
    assert code == 0, err
    return RemotePartition(open_store(), topic, 0)


def state(root, rp: RemotePartition) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """The partition's objects (name, size) and every file of the partition directories with its
    digest, lock files aside (a writable open rewrites the log dir's clean-shutdown marker and
    takes its locks whatever it then does)."""
    objects = [(o.name, o.size) for o in rp.store.list(rp.prefix)]
    files = {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
             for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")
             for p in sorted(d.rglob("*")) if p.is_file() and p.suffix != ".lock"}
    return objects, files


def refused(root, monkeypatch, capsys, rp: RemotePartition, *args: str) -> str:
    """Run ``logctl args``; assert it is a one-line refusal that changed nothing; its line."""
    before = state(root, rp)
    code, _, err = run_logctl(root, monkeypatch, capsys, *args)
    assert code == 1 and err.startswith("error: ") and err.count("\n") == 1, (args, err)
    after = state(root, rp)
    assert after[0] == before[0], args
    assert {k for k in before[1].keys() | after[1].keys() if before[1].get(k) != after[1].get(k)} == set(), args
    return err


def overwrite(rp: RemotePartition, name: str, data: bytes) -> None:
    """What a user with write access to the bucket can do: replace an object in place."""
    obstore.put(rp.store.raw, rp.store.key(rp.name(name)), data)


@pytest.mark.parametrize("body", [b"[" * 100_000, b"{" + b'"a":{' * 50_000])
def test_a_version_nested_too_deeply_is_refused_in_one_line(remote_env, tmp_path, monkeypatch, capsys, body):
    root = tmp_path / "logs"
    build(root)
    rp = tier(root, monkeypatch, capsys)
    rp.store.put_new(rp.name(version_name(2)), body)  # a forged latest version
    for args in (["consume", "t", "--partition", "0"], ["versions", "t", "--partition", "0"],
                 ["topic", "describe", "t"], ["compact", "--topic", "t", "--partition", "0", "--now-ms", str(NOW)],
                 ["tier", "--topic", "t"], ["sweep"],
                 ["restore", "t", "--partition", "0", "--version", "1"]):
        assert "nested too deeply" in refused(root, monkeypatch, capsys, rp, *args), args


@pytest.mark.parametrize(("variable", "value", "named"), [
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:99999", "AWS_ENDPOINT_URL"),  # the client panicked on the port
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:0", "AWS_ENDPOINT_URL"),
    ("AWS_ENDPOINT_URL", "http://user:pw@127.0.0.1:9000", "AWS_ENDPOINT_URL"),
    ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000?x=1", "AWS_ENDPOINT_URL"),
    ("AWS_ACCESS_KEY_ID", "logplat\nx", "AWS_ACCESS_KEY_ID"),  # the client panicked on the header
    ("AWS_SECRET_ACCESS_KEY", "se cret", "AWS_SECRET_ACCESS_KEY"),
    ("AWS_REGION", "us-east-1\r", "AWS_REGION"),
])
def test_a_location_the_client_cannot_use_is_refused_before_any_request(
        remote_env, tmp_path, monkeypatch, capsys, variable, value, named):
    root = tmp_path / "logs"
    build(root)
    rp = tier(root, monkeypatch, capsys)
    monkeypatch.setenv(variable, value)
    for args in (["versions", "t", "--partition", "0"], ["tier"], ["compact", "--now-ms", str(NOW)]):
        err = refused(root, monkeypatch, capsys, rp, *args)
        assert named in err and "secret" not in err.replace("AWS_SECRET_ACCESS_KEY", ""), err


def test_compact_of_every_topic_refuses_an_unreachable_store_before_cleaning_any(
        remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    build(root)
    rp = tier(root, monkeypatch, capsys)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # nothing listens there
    err = refused(root, monkeypatch, capsys, rp, "compact", "--now-ms", str(NOW))  # u was cleaned, t failed
    assert "not reachable" in err and "Connection refused" in err, err
    monkeypatch.delenv("LOGPLAT_REMOTE_STORAGE")
    assert "LOGPLAT_REMOTE_STORAGE is not set" in refused(root, monkeypatch, capsys, rp, "compact", "--now-ms",
                                                          str(NOW))
    code, out, err = run_logctl(root, monkeypatch, capsys, "compact", "--dry-run", "--now-ms", str(NOW))
    assert code == 0 and "u-0: due" in out, err  # a dry run sends no request


def test_compaction_refuses_a_segment_object_cut_short(remote_env, tmp_path, monkeypatch, capsys):
    root = tmp_path / "logs"
    build(root)
    rp = tier(root, monkeypatch, capsys)
    segment = rp.latest().segments[1]
    overwrite(rp, segment.log, rp.read(segment.log)[:segment.size_bytes // 2])
    err = refused(root, monkeypatch, capsys, rp, "compact", "--topic", "t", "--partition", "0", "--now-ms", str(NOW))
    assert segment.log in err and f"the version records {segment.size_bytes}" in err, err  # it committed the loss
    assert rp.version_numbers() == [1]


def test_a_topic_of_the_longest_legal_name_is_compacted_in_its_bucket(remote_env, tmp_path, monkeypatch, capsys):
    root, topic = tmp_path / "logs", "z" * 249
    build(root, topic)
    rp = tier(root, monkeypatch, capsys, topic)
    code, out, err = run_logctl(root, monkeypatch, capsys, "compact", "--topic", topic, "--partition", "0",
                                "--now-ms", str(NOW))  # its scratch directory's name was too long
    assert code == 0 and "remote version 2 committed" in out, err
    assert rp.latest().operation == "compact"


def test_a_version_ending_past_the_local_log_is_refused_not_read_short(remote_env, tmp_path, monkeypatch, capsys):
    """A forged latest version that ends past the local log end would hide the local records
    from a read: reads refuse it (and verify names it) instead of returning less."""
    root = tmp_path / "logs"
    build(root)
    rp = tier(root, monkeypatch, capsys)
    latest = rp.latest()
    forged = latest.successor(writer=latest.writer, operation="tier", committed_ms=latest.committed_ms,
                              release_horizon_ms=0, summary={}, end_offset=10**6,
                              segments=(*latest.segments[:-1],
                                        replace(latest.segments[-1], end_offset=10**6)))
    rp.store.put_new(rp.name(version_name(forged.version)), forged.encode())
    assert "past the local log end offset" in refused(root, monkeypatch, capsys, rp, "consume", "t", "--partition", "0")
    code, out, _ = run_logctl(root, monkeypatch, capsys, "verify", "--topic", "t")
    assert code == 1 and "past the local log end offset" in out


def test_a_location_with_an_empty_prefix_part_is_refused() -> None:
    from storage_engine.remote.errors import RemoteStorageError
    from storage_engine.remote.location import parse_location

    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    for url in ("s3://bucket//x", "s3://bucket/x//y"):
        with pytest.raises(RemoteStorageError, match="empty part"):
            parse_location(url, env)
