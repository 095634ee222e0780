"""The transaction index against a live Kafka 4.4 broker: (a) the ``.txnindex`` files our
recovery rebuilds from a broker's ``.log`` files are the broker's, byte for byte; (b) a log
our engine wrote (transactions committed and aborted, compacted) put under a stopped broker is
loaded with no recovery, so the broker answers ``read_committed`` fetches from our
``.txnindex`` files alone, and serves exactly the committed records."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from storage_engine.cleaner import LogCleaner
from storage_engine.log.checkpoint import RECOVERY_POINT_CHECKPOINT, write_checkpoint
from storage_engine.logdir.manager import LogManager
from storage_engine.tools.verify import verify_log
from tests.helpers.engine import open_topic
from tests.helpers.kafka_broker import install_partition, unique_topic
from tests.helpers.transactions import TxnWriter


def _txn_files(part: Path) -> dict[str, bytes]:
    return {n: (part / n).read_bytes() for n in sorted(os.listdir(part)) if n.endswith(".txnindex")}


def _wait_until_stable(broker, topic: str, timeout_s: float = 30) -> int:
    """The log end offset, once the last stable offset reached it (the coordinator writes the
    markers after the producers' calls return)."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    committed = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    uncommitted = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            end = uncommitted.end_offsets([tp])[tp]
            if committed.end_offsets([tp])[tp] == end:
                return end
            time.sleep(0.1)
    finally:
        committed.close()
        uncommitted.close()
    raise AssertionError(f"{topic}: the last stable offset never reached the log end")


def test_our_recovery_rebuilds_the_brokers_txnindex_files(kafka_broker, tmp_path):
    topic = unique_topic("txn-written")
    kafka_broker.create_topic(topic, {"internal.segment.bytes": "1000"})  # Kafka 4 refuses a segment.bytes < 1 MiB
    one, two = (kafka_broker.producer(transactional_id=f"{topic}-{n}") for n in (1, 2))
    for p in (one, two):
        p.init_transactions()
    for i in range(12):  # interleaved: an abort while the other producer's transaction is open
        for n, p in ((1, one), (2, two)):
            p.begin_transaction()
            p.send(topic, key=f"k{i % 4}".encode(), value=f"{n}-{i}".encode(), partition=0)
            p.flush()
        (one.abort_transaction if i % 2 else one.commit_transaction)()
        (two.abort_transaction if i % 3 == 0 else two.commit_transaction)()
    for p in (one, two):
        p.close()
    _wait_until_stable(kafka_broker, topic)
    broker_part = kafka_broker.partition_dir(topic)
    written = _txn_files(broker_part)
    assert len(written) >= 3 and all(written.values()), written  # several segments, each with aborts

    bases = sorted(int(n.split(".")[0]) for n in written)
    for recover_from in (0, bases[2]):  # everything; from a segment whose open transactions a snapshot gives
        log_dir = tmp_path / f"from-{recover_from}"
        part = log_dir / broker_part.name
        shutil.copytree(broker_part, part)
        for name in list(_txn_files(part)):
            if int(name.split(".")[0]) >= recover_from:
                (part / name).unlink()
        write_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, {(topic, 0): recover_from})  # no clean-shutdown marker
        with LogManager([log_dir]) as ours:
            log = ours.get_log(topic, 0)
            assert _txn_files(part) == written, recover_from
            report = verify_log(log)
            assert report.ok, report.problems


def test_the_broker_serves_read_committed_from_our_txnindex(broker_factory, tmp_path):
    broker = broker_factory()
    topic = unique_topic("txn-ours")
    # the broker's cleaner leaves the log alone (a lag no record has reached), so what it serves is ours
    broker.create_topic(topic, {"cleanup.policy": "compact", "min.compaction.lag.ms": "86400000"})
    now = int(time.time() * 1000)
    ours = open_topic(tmp_path, topic, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01",
                      file_delete_delay_ms="0")
    try:
        log = ours.get_log(topic, 0)
        w = TxnWriter(log, now)
        a, b = 900_001, 900_002
        for i in range(6):  # a section our cleaner compacts: aborted records go, their markers stay
            w.data(a, (f"k{i % 2}", f"c{i}"))
            w.data(b, (f"k{i % 2}", f"a{i}"))
            w.commit(a)
            w.abort(b)
        log.roll(now=now)
        LogCleaner(ours).compact(topic, 0, now_ms=now)
        w.data(a, ("x", "c-open-across-the-roll"))  # a's transaction opens before the roll...
        log.roll(now=now)
        w.data(b, ("y", "a-aborted-while-a-open"))
        w.abort(b)                                   # ...and is open when b aborts: LSO = a's first offset
        w.data(a, ("x", "c-then-committed"))
        w.commit(a)
        w.data(b, ("z", "a-last"))
        w.abort(b)
        records = [(r.offset, r.key, r.value) for r in log.read(log.log_start_offset, max_records=10**6)]
        assert verify_log(log).ok, verify_log(log).problems
    finally:
        ours.close()
    committed = [r for r in records if r[2].startswith(b"c")]
    assert len(committed) < len(records)  # aborted records are still in the log: only the index hides them
    written = _txn_files(tmp_path / f"{topic}-0")
    assert written

    broker.stop()
    part = install_partition(broker, topic, 0, tmp_path)
    mark = broker.log_mark()
    broker.start()
    served = {level: [(r.offset, r.key, r.value) for r in broker.consume(topic, isolation_level=level)]
              for level in ("read_uncommitted", "read_committed")}
    assert served["read_uncommitted"] == records
    assert served["read_committed"] == committed
    loading = [line for line in broker.server_log_since(mark).splitlines() if f"partition={topic}-0," in line]
    assert loading and not [line for line in loading if "Recovering" in line], loading  # a clean load: no recovery
    assert _txn_files(part) == written
