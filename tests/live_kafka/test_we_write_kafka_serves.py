"""We write, Kafka serves: partition folders our engine made, loaded by a live Kafka 4.4 broker.

Each kind of folder (appended over several segments with headers and every codec, log-append
time, transactions, compacted by our cleaner, trimmed by ``retention.ms`` and by
``retention.bytes``, ``delete-records``-ed inside a batch, recovered after our writer was
SIGKILLed mid-append) is built by our engine in a folder of its own, then put under one stopped
broker that holds a topic of that name with the same configuration (``install_partition``: our
checkpoints and a clean-shutdown marker with the broker's epoch). On restart the broker must

* load every partition without recovery: its ``LogManager`` logs "Skipping recovery of N logs
  ... since clean shutdown file was found" and its ``LogLoader`` no "Recovering unflushed
  segment" line for the partition (the control test removes the marker and sees both change);
* serve exactly our records to a real consumer (offset, timestamp and its type, key, value,
  headers; control batches unseen) with our log start and end offsets (ListOffsets);
* take a real producer's records at our log end offset and on, and, for the compacted topic,
  clean on top of our output with its own ``LogCleaner`` to the latest value per key.

Under read_uncommitted only: read_committed, served from our ``.txnindex`` files, is checked in
``test_txn_index_served.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from storage_engine.cleaner import LogCleaner
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.log.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType, decode_batch
from tests.helpers.cleaner import data_batch
from tests.helpers.crash import crash_env
from tests.helpers.engine import records
from tests.helpers.kafka_broker import KafkaBroker, install_partition
from tests.helpers.paths import REPO

#: the broker's wording (``LogManager.loadLogs`` / ``LogLoader.recoverLog``), read off a broker we killed
CLEAN_LOAD = "since clean shutdown file was found"
DIR_RECOVERY = "since no clean shutdown file was found"
SEGMENT_RECOVERY = "Recovering unflushed segment"

SEGMENT_BYTES = 1024  # ours only: Kafka 4.x refuses a topic segment.bytes under 1 MiB, and loads ours as they are
HOUR_MS = 3_600_000
TXN_COMMITTED_PID, TXN_ABORTED_PID = 900_001, 900_002  # far above the broker's first producer-id block

#: (offset, timestamp, timestamp type, key, value, headers): what a consumer is given of a record
Served = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass(frozen=True)
class Kind:
    """One kind of folder our engine makes: our topic config, the broker topic's, the builder."""

    name: str
    build: Callable[[Path, str, int, dict[str, str]], None]
    ours: dict[str, str] = field(default_factory=dict)
    broker: dict[str, str] = field(default_factory=dict)
    keyed: bool = False


@dataclass
class Ours:
    """What our engine serves from a folder: the model the broker is held to."""

    records: list[Served]
    log_start: int
    log_end: int


# -- builders: each makes its folder with our engine's API ----------------------------------------

def _manager(root: Path, topic: str, configs: dict[str, str]) -> LogManager:
    manager = LogManager([root])
    manager.admin.create_topic(topic, 1, {"segment.bytes": str(SEGMENT_BYTES), **configs})
    return manager


def build_plain(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    """Several segments; every codec; headers (a null header value among them), a null key, a
    null value and an empty one."""
    with _manager(root, topic, configs) as m:
        log = m.get_log(topic, 0)
        start = 0
        for codec in CompressionType:
            for _ in range(2):
                log.append(records(4, start=start, ts=now - HOUR_MS + start, value_size=60), compression=codec, now=now)
                start += 4
        log.append([ProducerRecord(None, b"no key", now - 5, (("a", None), ("b", b""), ("a", b"again"))),
                    ProducerRecord(b"no value", None, now - 4),
                    ProducerRecord(b"empty", b"", now - 3, (("\u00e9t\u00e9", b"\x00\xff"),))], now=now)


def build_append_time(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    with _manager(root, topic, configs) as m:
        log = m.get_log(topic, 0)
        for i in range(3):
            log.append(records(5, start=5 * i, ts=now - HOUR_MS), now=now - 1000 + i)


def _append_marker(root: Path, topic: str, pid: int, *, commit: bool, ts: int) -> None:
    """The transaction coordinator's marker at the log end (``Log.append_end_txn_marker``, the
    leader's path for it: clients may not write control batches), with its ``.txnindex`` entry."""
    with LogManager([root]) as m:
        m.get_log(topic, 0).append_end_txn_marker(pid, 0, commit=commit, now=ts)


def build_transactions(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    """Plain records around a committed transaction and an aborted one, interleaved."""
    with _manager(root, topic, configs) as m:
        log = m.get_log(topic, 0)
        log.append(records(3, ts=now - 100), now=now)
        log.append_batch(data_batch(0, [("c1", "committed-1"), ("c2", "committed-2")], ts=now - 90,
                                    pid=TXN_COMMITTED_PID, epoch=0, seq=0, transactional=True), now=now)
        log.append_batch(data_batch(0, [("a1", "aborted-1")], ts=now - 80,
                                    pid=TXN_ABORTED_PID, epoch=0, seq=0, transactional=True), now=now)
    _append_marker(root, topic, TXN_COMMITTED_PID, commit=True, ts=now - 70)
    with LogManager([root]) as m:
        log = m.get_log(topic, 0)
        log.append_batch(data_batch(0, [("a2", "aborted-2")], ts=now - 60,
                                    pid=TXN_ABORTED_PID, epoch=0, seq=1, transactional=True), now=now)
    _append_marker(root, topic, TXN_ABORTED_PID, commit=False, ts=now - 50)
    with LogManager([root]) as m:
        m.get_log(topic, 0).append(records(2, start=3, ts=now - 40), now=now)


def build_compacted(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    """Ten keys overwritten over several segments, three deleted; our cleaner compacts (offset
    strategy, the only one Kafka has), then a few records more in the active segment."""
    with _manager(root, topic, configs) as m:
        log = m.get_log(topic, 0)
        for i in range(60):
            log.append(records(1, start=i, ts=now - 600_000 + i, keys=10), now=now)
        for key in (b"k3", b"k5", b"k7"):
            log.append([ProducerRecord(key, None, now - 500_000)], now=now)
        log.roll(now=now)
        report = LogCleaner(m).compact(topic, 0, now_ms=now)
        assert report.segments_written, report
        log.append(records(2, start=100, ts=now - 1000, keys=10), now=now)


def _appended_segments(root: Path, topic: str, now: int, configs: dict[str, str], old_ms: int) -> LogManager:
    """Forty records, their first half ``old_ms`` old, over several segments."""
    m = _manager(root, topic, configs)
    log = m.get_log(topic, 0)
    for i in range(40):
        log.append(records(1, start=i, ts=now - (old_ms if i < 20 else 60_000) + i, value_size=80), now=now)
    return m


def _apply_retention(m: LogManager, topic: str, now: int) -> None:
    [result] = m.retention.apply(m.retention.plans(topic, now_ms=now), now_ms=now)
    assert result.applied, result


def build_retention_ms(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    with _appended_segments(root, topic, now, configs, old_ms=3 * HOUR_MS) as m:
        _apply_retention(m, topic, now)


def build_retention_bytes(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    with _appended_segments(root, topic, now, configs, old_ms=60_000) as m:
        _apply_retention(m, topic, now)


def build_delete_records(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    """The log start offset moved inside a batch of a later segment; retention removes the
    segments wholly below it (the log start offset breach)."""
    with _manager(root, topic, configs) as m:
        log = m.get_log(topic, 0)
        for i in range(10):
            log.append(records(4, start=4 * i, ts=now - 1000, value_size=60), now=now)
        assert log.delete_records(22) == 22
        _apply_retention(m, topic, now)
        assert log.segments[0].base_offset < 22 < log.log_end_offset


def build_killed(root: Path, topic: str, now: int, configs: dict[str, str]) -> None:
    """``logctl produce`` SIGKILLed inside an append (in the roll it needs: the new segment is
    on disk, the old segment's last time-index entry and the batch are not); our next writable
    open, finding no clean-shutdown marker, recovers the dir, and closes it cleanly."""
    with _manager(root, topic, configs) as m:
        m.get_log(topic, 0).append(records(6, ts=now - 1000, value_size=100), now=now)
    lines = "".join(f'{{"key": "w{i}", "value": "{"v" * 100}"}}\n' for i in range(10))
    produce = [sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), "produce", topic,
               "--partition", "0", "--batch-size", "1"]
    killed = subprocess.run(produce, input=lines, capture_output=True, text=True, cwd=REPO,
                            env=crash_env("roll.after-new-segment"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (root / ".kafka_cleanshutdown").exists()
    with LogManager([root]) as m:  # the first writer after an unclean shutdown: it recovers the dir
        log = m.get_log(topic, 0)
        assert 6 < log.log_end_offset < 16  # the killed writer's earlier appends kept, its last one lost
    assert (root / ".kafka_cleanshutdown").exists()


KINDS = [
    Kind("plain", build_plain),
    Kind("append-time", build_append_time, {"message.timestamp.type": "LogAppendTime"},
         {"message.timestamp.type": "LogAppendTime"}),
    Kind("transactions", build_transactions),
    Kind("compacted", build_compacted, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
         {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100"}, keyed=True),
    Kind("retention-ms", build_retention_ms, {"retention.ms": str(HOUR_MS)}, {"retention.ms": str(HOUR_MS)}),
    Kind("retention-bytes", build_retention_bytes, {"retention.bytes": "3000"}, {"retention.bytes": "3000"}),
    Kind("delete-records", build_delete_records),
    Kind("killed", build_killed),
]
BY_NAME = {k.name: k for k in KINDS}


# -- reading both sides ----------------------------------------------------------------------------

def read_ours(root: Path, topic: str) -> Ours:
    """Every data record from our log start, as our engine decodes it (control batches left out,
    as a consumer leaves them out)."""
    with LogManager([root], read_only=True) as m:
        log = m.get_log(topic, 0)
        out = [(r.offset, r.timestamp, int(raw.header.timestamp_type), r.key, r.value, tuple(r.headers))
               for raw in log.iter_batches() if not raw.header.is_control
               for r in decode_batch(raw) if r.offset >= log.log_start_offset]
        return Ours(out, log.log_start_offset, log.log_end_offset)


def read_broker(broker: KafkaBroker, topic: str) -> list[Served]:
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, tuple((k, v) for k, v in r.headers))
            for r in broker.consume(topic)]


def recovery_lines(server_log: str, topic: str) -> list[str]:
    return [line for line in server_log.splitlines() if f"partition={topic}-0," in line and SEGMENT_RECOVERY in line]


@dataclass
class Installed:
    broker: KafkaBroker
    roots: dict[str, Path]
    ours: dict[str, Ours]
    startup_log: str


@pytest.fixture(scope="module")
def installed(kafka_libs: Path, tmp_path_factory) -> Installed:
    """Every kind built by our engine, installed under one broker (stopped once, started once)."""
    now = int(time.time() * 1000)
    base = tmp_path_factory.mktemp("ours")
    roots = {}
    for kind in KINDS:
        roots[kind.name] = base / kind.name
        kind.build(roots[kind.name], kind.name, now, kind.ours)
    ours = {name: read_ours(root, name) for name, root in roots.items()}
    broker = KafkaBroker(tmp_path_factory.mktemp("broker"), kafka_libs).start()
    try:
        for kind in KINDS:
            broker.create_topic(kind.name, kind.broker)
        broker.stop()
        for name, root in roots.items():
            install_partition(broker, name, 0, root)
        mark = broker.log_mark()
        broker.start()
        yield Installed(broker, roots, ours, broker.server_log_since(mark))
    finally:
        broker.stop()
        broker.kill()


def assert_loaded_without_recovery(installed: Installed, topic: str) -> None:
    """The broker's load of our partition: no recovery, our log start and end offsets."""
    startup, ours = installed.startup_log, installed.ours[topic]
    assert CLEAN_LOAD in startup and DIR_RECOVERY not in startup
    assert recovery_lines(startup, topic) == []
    [loaded] = [line for line in startup.splitlines() if "Completed load of Log(" in line and f"topic={topic}," in line]
    assert f"logStartOffset={ours.log_start}, logEndOffset={ours.log_end})" in loaded, loaded


def assert_served_exactly(installed: Installed, topic: str) -> None:
    ours = installed.ours[topic]
    assert ours.records, topic
    assert read_broker(installed.broker, topic) == ours.records
    assert installed.broker.offsets(topic) == (ours.log_start, ours.log_end)


def max_timestamp(broker: KafkaBroker, topic: str) -> tuple[int, int]:
    """ListOffsets MAX_TIMESTAMP (KIP-734): the broker finds the segment by each one's largest
    timestamp, which it takes from the time index's last entry of a segment it loaded."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    tp = TopicPartition(topic, 0)
    admin = broker.admin()
    try:
        found = admin.list_partition_offsets({tp: OffsetSpec.MAX_TIMESTAMP})[tp]
    finally:
        admin.close()
    return found.timestamp, found.offset


def produce_after(broker: KafkaBroker, topic: str, pairs: list[tuple[bytes, bytes | None]]) -> list[int]:
    """A real producer's records, stamped by its clock (the broker rolls by record timestamps)."""
    producer = broker.producer()
    try:
        return [producer.send(topic, key=k, value=v).get(timeout=30).offset for k, v in pairs]
    finally:
        producer.close()


@pytest.mark.parametrize("name", [k.name for k in KINDS if k.name != "compacted"])
def test_the_broker_loads_our_folder_without_recovery_serves_it_and_appends_after_it(installed, name):
    broker, ours = installed.broker, installed.ours[name]
    assert_loaded_without_recovery(installed, name)
    assert_served_exactly(installed, name)
    top = max(ts for _, ts, *_ in ours.records)
    assert max_timestamp(broker, name) == (top, min(o for o, ts, *_ in ours.records if ts == top))
    pairs = [(b"after-1", b"x"), (b"after-2", b"y")]
    assert produce_after(broker, name, pairs) == [ours.log_end, ours.log_end + 1]
    served = read_broker(broker, name)
    assert served[:len(ours.records)] == ours.records
    assert [(o, k, v) for o, _, _, k, v, _ in served[len(ours.records):]] == [
        (ours.log_end + i, k, v) for i, (k, v) in enumerate(pairs)]


def latest_per_key(served: list[Served]) -> list[Served]:
    latest = {}
    for record in served:
        latest[record[3]] = record
    return sorted(latest.values())


def test_a_broker_restart_over_our_compacted_directory_with_a_clean_shutdown_marker_does_not_rerun_recovery_and_serves_every_record(installed):
    """Then Kafka's cleaner cleans on top of ours: first our output alone (its checkpoint is not
    carried over, so all of it is dirty to the broker), which keeps every record we kept, then
    over a producer's overwrites, to the latest value per key."""
    broker, topic, ours = installed.broker, "compacted", installed.ours["compacted"]
    assert_loaded_without_recovery(installed, topic)
    assert_served_exactly(installed, topic)
    assert any(v is None for *_, v, _ in ours.records)  # our tombstones are served
    broker.wait_cleaned(topic, upto=1)  # Kafka's cleaner over our compacted segments
    assert read_broker(broker, topic) == ours.records
    overwrites = [(b"k1", b"new-1"), (b"k3", b"back"), (b"k5", None), (b"fresh", b"f")]
    offsets = produce_after(broker, topic, overwrites)
    assert offsets == list(range(ours.log_end, ours.log_end + len(overwrites)))
    time.sleep(0.2)  # past segment.ms: the next append rolls, so the overwrites become cleanable
    [roller] = produce_after(broker, topic, [(b"roller", b"r")])
    broker.wait_cleaned(topic, upto=roller)
    produced = [(o, k, v) for o, (k, v) in zip([*offsets, roller], [*overwrites, (b"roller", b"r")], strict=True)]
    expected = latest_per_key(ours.records + [(o, 0, 0, k, v, ()) for o, k, v in produced])
    assert [(o, k, v) for o, _, _, k, v, _ in read_broker(broker, topic)] == [(o, k, v) for o, _, _, k, v, _ in expected]


def test_control_without_the_clean_shutdown_marker_the_broker_recovers_our_segments_and_keeps_every_record(installed, broker_factory):
    """The wording the clean loads must not show does show when the broker recovers: our
    plain folder with the marker removed and the recovery point at 0, so Kafka's recovery
    validates every batch of every segment of ours and rebuilds their indexes."""
    name = "plain"
    broker = broker_factory("control")
    broker.create_topic(name, BY_NAME[name].broker)
    broker.stop()
    log_dir = install_partition(broker, name, 0, installed.roots[name]).parent
    os.unlink(log_dir / ".kafka_cleanshutdown")
    write_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT,
                     {**read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT), (name, 0): 0})
    mark = broker.log_mark()
    broker.start()
    startup = broker.server_log_since(mark)
    assert DIR_RECOVERY in startup
    segments = sorted(int(p.stem) for p in (installed.roots[name] / f"{name}-0").glob("*.log"))
    assert len(recovery_lines(startup, name)) == len(segments) > 2
    ours = installed.ours[name]
    assert read_broker(broker, name) == ours.records
    assert broker.offsets(name) == (ours.log_start, ours.log_end)
