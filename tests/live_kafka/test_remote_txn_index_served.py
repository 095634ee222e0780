"""Segments that come back from the remote tier, served by a live Kafka 4.4 broker: a tiered
partition with aborted transactions is compacted on its remote tier and then restored to the
version before (partition 0), or just compacted (partition 1); each version is materialized
and put under a stopped broker, which loads it with no recovery and so answers
``read_committed`` fetches from the ``.txnindex`` files that came back from the bucket alone."""

from __future__ import annotations

import time
from pathlib import Path

from storage_engine.cleaner.remote_cleaning import compact_remote
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.access import remote_partition
from storage_engine.remote.materialize import materialize
from storage_engine.remote.restore import restore
from storage_engine.remote.tiering import tier_partition
from tests.helpers.engine import open_topic
from tests.helpers.kafka_broker import install_partition, unique_topic
from tests.helpers.transactions import TxnWriter


def _tier_and_bring_back(root: Path, topic: str, now: int) -> dict[int, Path]:
    """Our tiered topic, each partition with interleaved committed and aborted transactions
    (values ``c``/``a``), its remote tier compacted, then partition 0 restored to the tiered
    version; each latest version materialized into a log dir of its own (returned)."""
    manager = open_topic(root / "ours", topic, partitions=2, segment_bytes=400, remote_storage_enable="true",
                         cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
    out = {}
    try:
        for partition in (0, 1):
            log = manager.get_log(topic, partition)
            w = TxnWriter(log, now)
            a, b = 900_001, 900_002
            for i in range(8):
                w.data(a, (f"k{i % 3}", f"c{i}"))
                w.data(b, (f"k{i % 3}", f"{'a' if i % 2 else 'c'}-b{i}"))
                (w.abort if i % 2 else w.commit)(b)
                w.commit(a)
            w.data(a, ("x", "c-open"))  # the active segment's open transaction keeps the tier below it
            rp = remote_partition(topic, partition, log.config)
            tier_partition(log, rp, now, release_local=False)
            assert compact_remote(rp, log.config, now_ms=now, force=True, scratch_dir=root / "work").committed
            if partition == 0:
                restore(rp, log.config, 1, partition_dir=log.dir)
            version = rp.latest()
            assert any(s.txn_index for s in version.segments)
            out[partition] = root / f"back-{partition}"
            materialize(rp, version, out[partition])
    finally:
        manager.close()
    return out


def test_the_broker_serves_restored_and_remotely_compacted_segments_read_committed(remote_env, broker_factory,
                                                                                  tmp_path) -> None:
    broker = broker_factory()
    topic = unique_topic("remote-txn")
    # the broker's cleaner leaves the logs alone (a lag no record has reached), so what it serves is ours
    broker.create_topic(topic, {"cleanup.policy": "compact", "min.compaction.lag.ms": "86400000"}, partitions=2)
    now = int(time.time() * 1000)
    dirs = _tier_and_bring_back(tmp_path, topic, now)
    expected = {}
    for p, log_dir in dirs.items():
        with LogManager([log_dir]) as back:
            log = back.get_log(topic, p)
            # the tier ends inside the last transactions (their markers stayed local): they are
            # open in the materialized log, which a read_committed consumer reads up to
            stable = log.last_stable_offset()
            records = [(r.offset, r.key, r.value) for r in log.read(0, max_records=10**6)]
            committed = [r for r in records if r[0] < stable and r[2].startswith(b"c")]
            assert [(r.offset, r.key, r.value) for r in log.read(0, max_records=10**6,
                                                                 isolation_level="read_committed")] == committed
        # the restored version holds aborted records below the last stable offset, which only the
        # .txnindex hides from a broker; the cleaner removed the compacted version's (not its entries)
        assert any(r[0] < stable and r[2].startswith(b"a") for r in records) == (p == 0)
        expected[p] = records, committed
    broker.stop()
    for p, log_dir in dirs.items():
        install_partition(broker, topic, p, log_dir)
    mark = broker.log_mark()
    broker.start()
    for p, (records, committed) in expected.items():
        assert [(r.offset, r.key, r.value) for r in broker.consume(topic, p)] == records
        served = [(r.offset, r.key, r.value) for r in broker.consume(topic, p, isolation_level="read_committed")]
        assert served == committed, p
    loading = [line for line in broker.server_log_since(mark).splitlines() if f"partition={topic}-" in line]
    assert loading and not [line for line in loading if "Recovering" in line], loading  # clean loads: no recovery
