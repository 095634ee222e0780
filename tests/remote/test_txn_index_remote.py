"""The ``.txnindex`` travels with its segment through the remote tier (real S3 server): tiering
uploads it as the segment's optional object, and the segments that come back from the bucket
(a materialized version, a restored one, a remotely compacted one) carry it, so a broker that
loads such a directory after a clean shutdown filters aborted transactions for
``read_committed`` consumers. Versions written before the field existed still decode."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from storage_engine.cleaner.remote_cleaning import compact_remote
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import remote_partition
from storage_engine.remote.errors import RemoteMetadataError
from storage_engine.remote.materialize import materialize
from storage_engine.remote.names import new_writer_id
from storage_engine.remote.partition import wall_clock_ms
from storage_engine.remote.restore import restore
from storage_engine.remote.tiering import tier_partition
from storage_engine.remote.version import decode_version, release_horizon_ms
from storage_engine.tools.verify import verify_log, verify_partition
from tests.helpers.engine import append_each, open_topic, records
from tests.helpers.transactions import NOW, TxnWriter


def transactional_log(root: Path):
    """A compacted, tiered topic whose segments hold an aborted transaction (interleaved with a
    committed one) and plain records after, small segments so the abort is in a rolled one."""
    manager = open_topic(root, segment_bytes=300, remote_storage_enable="true", cleanup_policy="compact")
    log = manager.get_log("t", 0)
    txn = TxnWriter(log)
    txn.data(7, ("a", "aborted-1"), ("b", "aborted-2"))
    txn.data(8, ("a", "committed-1"))
    txn.data(7, ("c", "aborted-3"))
    txn.abort(7)
    txn.commit(8)
    txn.data(9, ("d", "aborted-4"))
    txn.abort(9)
    append_each(log, records(12, keys=3, ts=NOW))
    return manager, log


def txn_index_bytes(part: Path) -> dict[str, bytes]:
    """Every non-empty ``.txnindex`` of a partition directory, by file name."""
    return {p.name: p.read_bytes() for p in sorted(part.glob("*.txnindex")) if p.stat().st_size}


def committed_values(log) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in log.read(0, max_bytes=1 << 24, isolation_level="read_committed")]


def test_tiering_uploads_the_txnindex_and_materialize_brings_it_back(remote_env, tmp_path) -> None:
    manager, log = transactional_log(tmp_path / "logs")
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    version = rp.latest()
    local = txn_index_bytes(log.dir)
    assert len(local) == 2, "both aborts should have made an entry in rolled segments"
    with_txn = [s for s in version.segments if s.txn_index is not None]
    assert sorted(f"{s.base_offset:020d}.txnindex" for s in with_txn) == sorted(local)
    for seg in with_txn:  # the object is the local file, byte for byte; a segment without one has no object
        assert rp.read(seg.txn_index) == local[f"{seg.base_offset:020d}.txnindex"]
    assert rp.missing_objects(version) == []
    assert verify_partition(manager, "t", 0).problems == []

    part = materialize(rp, version, tmp_path / "scratch")
    assert txn_index_bytes(part) == local
    with LogManager([tmp_path / "scratch"], topic_configs={"t": log.config}) as scratch:
        restored = scratch.get_log("t", 0)
        assert verify_log(restored).problems == []
        tiered_end = version.end_offset
        assert [v for v in committed_values(restored) if v[0] < tiered_end] == \
            [v for v in committed_values(log) if v[0] < tiered_end]
        assert not any(v is not None and v.startswith(b"aborted") for _, v in committed_values(restored))


def test_a_restored_and_a_remotely_compacted_version_carry_their_txnindex(remote_env, tmp_path) -> None:
    manager, log = transactional_log(tmp_path / "logs")
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    local = txn_index_bytes(log.dir)
    compacted = compact_remote(rp, log.config, now_ms=NOW, force=True, scratch_dir=tmp_path / "work").committed
    assert compacted is not None and compacted.operation == "compact"
    part = materialize(rp, compacted, tmp_path / "compacted")
    assert txn_index_bytes(part), "the cleaner keeps the ABORT markers' entries (no tombstone horizon passed)"
    with LogManager([tmp_path / "compacted"], topic_configs={"t": log.config}) as scratch:
        cleaned = scratch.get_log("t", 0)
        assert verify_log(cleaned).problems == []
        assert not any(v is not None and v.startswith(b"aborted") for _, v in committed_values(cleaned))

    result = restore(rp, log.config, 1, partition_dir=log.dir)
    back = rp.latest()
    assert (back.version, back.operation, result.restored_version) == (3, "restore", 1)
    assert txn_index_bytes(materialize(rp, back, tmp_path / "restored")) == local
    assert verify_partition(manager, "t", 0).problems == []


def test_a_version_without_txn_index_fields_still_decodes_and_the_field_is_strict(remote_env, tmp_path) -> None:
    manager, log = transactional_log(tmp_path / "logs")
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    version = rp.latest()
    obj = version.to_json()
    plain = [s for s in obj["segments"] if "txn_index" not in s]
    assert plain, "a segment without an aborted transaction encodes without the field, as before it existed"

    def decode(o: dict) -> object:
        return decode_version(json.dumps(o).encode(), topic="t", partition=0, version=version.version, where="v")

    old = json.loads(json.dumps(obj))
    for seg in old["segments"]:
        seg.pop("txn_index", None)
    assert all(s.txn_index is None for s in decode(old).segments)  # a version written before the field
    assert decode(obj) == version
    for bad in (None, "data/../x.txnindex", version.segments[0].log):
        broken = json.loads(json.dumps(obj))
        broken["segments"][0]["txn_index"] = bad
        with pytest.raises(RemoteMetadataError):
            decode(broken)


def test_verify_names_a_remote_segment_without_its_txnindex(remote_env, tmp_path) -> None:
    """A tier written before segments carried their ``.txnindex`` (here: the latest version
    re-committed without the objects) is readable, and ``verify`` says what a broker would get
    wrong with it."""
    manager, log = transactional_log(tmp_path / "logs")
    rp = remote_partition("t", 0, log.config)
    tier_partition(log, rp, NOW, release_local=False)
    version = rp.latest()
    stripped = tuple(replace(s, txn_index=None) for s in version.segments)
    rp.commit(version.successor(writer=new_writer_id(), operation="tier", committed_ms=wall_clock_ms(),
                                release_horizon_ms=release_horizon_ms(log.config), summary={}, segments=stripped))
    problems = verify_partition(manager, "t", 0).problems
    assert len(problems) == 2 and all("has no .txnindex object): no entry for the transaction of producer" in p
                                      and "a broker serves its records to read_committed consumers" in p
                                      for p in problems), problems
