"""The remote tier's core on the real S3 server: names, strict version reading, the
conditional commit, and configuration errors before anything is written."""

from __future__ import annotations

import json
import os

import pytest

from storage_engine.remote.errors import RemoteMetadataError, RemoteStorageError, VersionConflictError
from storage_engine.remote.location import location_from_env, parse_location
from storage_engine.remote.names import check_data_name, new_writer_id
from storage_engine.remote.partition import RemotePartition
from storage_engine.remote.version import decode_version, empty_version


def _one_segment_version(rp: RemotePartition, tmp_path, writer: str):
    f = tmp_path / "seg"
    f.write_bytes(b"x" * 64)
    fd = os.open(f, os.O_RDONLY)
    try:
        seg = rp.upload_segment(writer, base_offset=0, end_offset=10, max_timestamp=5, mtime_ms=1,
                                files={"log": fd, "index": fd, "timeindex": None})
    finally:
        os.close(fd)
    return empty_version(rp.topic, rp.partition, 0).successor(writer=writer, operation="tier", committed_ms=1,
                                                               release_horizon_ms=0, summary={}, end_offset=10,
                                                               segments=(seg,))


def test_two_writers_one_commit(remote_env, tmp_path) -> None:
    store = location_from_env().open()
    rp = RemotePartition(store, "t", 0)
    assert rp.latest() is None
    a, b = new_writer_id(), new_writer_id()
    va, vb = _one_segment_version(rp, tmp_path, a), _one_segment_version(rp, tmp_path, b)
    rp.commit(va)
    with pytest.raises(VersionConflictError, match="another writer committed version 1"):
        rp.commit(vb)
    latest = rp.latest()
    assert latest is not None and latest.writer == a and rp.missing_objects(latest) == []
    assert store.requests["PUT"] == 8 and store.counters()["bytes_uploaded"] > 0


@pytest.mark.parametrize("name", ["../x/data/00000000000000000000-0123456789abcdef.log", "data/0-0.log",
                                  "/data/00000000000000000000-0123456789abcdef.log",
                                  "data/00000000000000000000-0123456789ABCDEF.log", 7])
def test_names_outside_data_are_refused(name) -> None:
    with pytest.raises(RemoteMetadataError):
        check_data_name(name)


def test_a_version_naming_another_partitions_object_is_refused(tmp_path) -> None:
    v = empty_version("t", 0, 0).successor(writer="w", operation="tier", committed_ms=1, release_horizon_ms=0,
                                            summary={})
    obj = v.to_json()
    obj["producer_snapshot"] = "../t-1/data/00000000000000000000-0123456789abcdef.snapshot"
    with pytest.raises(RemoteMetadataError, match="not a data object"):
        decode_version(json.dumps(obj).encode(), topic="t", partition=0, version=1, where="v1")
    obj["producer_snapshot"] = None
    obj["extra"] = 1
    with pytest.raises(RemoteMetadataError, match="unknown"):
        decode_version(json.dumps(obj).encode(), topic="t", partition=0, version=1, where="v1")


@pytest.mark.parametrize(("url", "env", "match"), [
    ("s3://B/x", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}, "not an S3 bucket name"),
    ("s3://bucket/../x", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}, "prefix"),
    ("s3://bucket/x", {}, "AWS_ACCESS_KEY_ID"),
    ("s3://bucket/x", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                       "AWS_ENDPOINT_URL": "http://example.com"}, "loopback"),
    ("gs://bucket/x", {}, "s3://bucket/prefix"),
])
def test_bad_locations_are_one_line_errors(url, env, match) -> None:
    with pytest.raises(RemoteStorageError, match=match) as info:
        parse_location(url, env)
    assert "\n" not in str(info.value)


def test_an_unreachable_endpoint_fails_before_any_write() -> None:
    from spark_jobs.runtime.connect_server import free_port

    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(RemoteStorageError, match="not reachable") as info:
        parse_location("s3://bucket/x", env).open()
    assert "\n" not in str(info.value)
