"""Benchmark: our cleaner against Kafka 4.4's LogCleaner, the same log, the same run.

The log is written once by our engine (``bench_compaction.generate``: 128 MB segments of
uncompressed 1,000-odd-record batches, 16-byte keys, ``--value-size`` values, keys drawn from
``--live-fraction`` of the records, or every key distinct with ``--live-fraction 1``), copied,
and installed under a stopped broker's partition (``tests/helpers/kafka_broker.install_partition``:
a cleanly shut down log, no recovery), at first with ``cleanup.policy=delete`` and no retention
so that nothing touches it. The broker restarts with one cleaner thread
(``log.cleaner.threads=1``) and first warms its JVM: a small topic a producer fills is cleaned
over a few rounds, so the JIT has compiled the cleaner's loops before the measured log (a cold
JVM interprets the first seconds of a clean). Then the log's policy turns ``compact`` and the
broker cleans it until its ``cleaner-offset-checkpoint`` reaches the active segment
(``KafkaBroker.wait_cleaned``): more keys than the dedupe buffer holds take several rounds, each
with its own statistics, and all of them count, as all of our passes do. Kafka's figures come from
its own statistics in ``log-cleaner.log`` (``LogCleaner$CleanerThread``: elapsed, bytes,
messages, the indexing / cleaning split, "Buffer utilization"), summed over the rounds, and its
wall time from the log's own timestamps (the first "Beginning cleaning of log" to the last
round's statistics). Ours cleans the copy in this process, single threaded:
:class:`~storage_engine.cleaner.Cleaner`'s wall time over all its passes and its stats (map
building = Kafka's indexing, recopy = its cleaning).

Memory per key: Kafka's dedupe buffer (``log.cleaner.dedupe.buffer.size``, 128 MiB default)
holds 24-byte entries (16-byte MD5 + 8-byte offset, its ``SkimpyOffsetMap``) up to the load
factor; ours charges what the key map of the core in use costs a key
(:meth:`~storage_engine.cleaner.offset_map.OffsetMap.capacity_for`).

Usage: ``python bench/bench_kafka_cleaner.py [--size-mb 200] [--value-size 100]
[--live-fraction 0.01] [--dir DIR] [--keep]``. Needs Java and Maven (Kafka's jars are fetched
once into a cache). Prints one line per figure; not a test.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_compaction import MB, NOW, SEGMENT_BYTES, generate  # noqa: E402

from storage_engine import native  # noqa: E402
from storage_engine.cleaner import LogCleaner  # noqa: E402
from storage_engine.cleaner.offset_map import KAFKA_BYTES_PER_ENTRY, OffsetMap  # noqa: E402
from storage_engine.logdir.manager import LogManager  # noqa: E402
from tests.helpers.kafka_broker import (  # noqa: E402
    KafkaBroker,
    KafkaBrokerError,
    KafkaUnavailable,
    install_partition,
    kafka_distribution,
)

GOAL = 1.5  # ours within 1.5x Kafka's time
DEDUPE_BUFFER = 128 * MB  # log.cleaner.dedupe.buffer.size, Kafka's default
LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor, Kafka's default
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES), "min.compaction.lag.ms": "0",
                 "min.cleanable.dirty.ratio": "0.01"}
#: the measured topic until the JVM is warm: neither the cleaner nor retention touches it
HELD_CONFIGS = {**TOPIC_CONFIGS, "cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
WARM_TOPIC = "warm"
WARM_CONFIGS = {**TOPIC_CONFIGS, "segment.bytes": str(1 * MB)}
WARM_ROUNDS, WARM_RECORDS, WARM_KEYS = 3, 40_000, 2_000  # ~4 MB a round over 1 MB segments
_STAMP = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]"


class FullJitBroker(KafkaBroker):
    """The tests' broker without ``-XX:TieredStopAtLevel=1``: that flag (C1 only) starts the JVM
    faster for the tests but slows the cleaner's loops; Kafka is measured with its full JIT."""

    def _java(self, main: str, *args: str) -> list[str]:
        return [a for a in super()._java(main, *args) if a != "-XX:TieredStopAtLevel=1"]


@dataclass
class KafkaStats:
    """Kafka's cleaner statistics for one log (``LogCleaner.recordStats``), summed over its
    rounds."""

    rounds: int
    elapsed_s: float  # "processed in N seconds"
    wall_s: float  # the first "Beginning cleaning of log" to the last statistics, from the log's timestamps
    mb_read: float
    index_s: float
    clean_s: float
    buffer_utilization: float  # the fullest round's
    messages: list[tuple[int, int]]  # each round's start and end size, in messages


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse_kafka_stats(text: str, log: str) -> KafkaStats | None:
    """The statistics of every cleaning round of ``log`` in ``log-cleaner.log``'s text, if any."""
    begin = re.search(_STAMP + rf" INFO Cleaner 0: Beginning cleaning of log {re.escape(log)} ", text)
    blocks = [m.groups() for m in re.finditer(
        _STAMP + r" INFO \[kafka-log-cleaner-thread-0\]: \n\tLog cleaner thread 0 cleaned log "
        + re.escape(log) + r" .*?\n"
        r"\t([\d.]+) MB of log processed in ([\d.]+) seconds.*?\n"
        r"\tIndexed [\d.]+ MB in ([\d.]+) seconds.*?\n"
        r"\tBuffer utilization: ([\d.]+)%\n"
        r"\tCleaned [\d.]+ MB in ([\d.]+) seconds.*?\n"
        r"\tStart size: [\d.]+ MB \(([\d,]+) messages\)\n"
        r"\tEnd size: [\d.]+ MB \(([\d,]+) messages\)", text)]
    if begin is None or not blocks:
        return None
    return KafkaStats(
        rounds=len(blocks), elapsed_s=sum(float(b[2]) for b in blocks),
        wall_s=_stamp(blocks[-1][0]) - _stamp(begin.group(1)), mb_read=sum(float(b[1]) for b in blocks),
        index_s=sum(float(b[3]) for b in blocks), clean_s=sum(float(b[5]) for b in blocks),
        buffer_utilization=max(float(b[4]) for b in blocks) / 100,
        messages=[(int(b[6].replace(",", "")), int(b[7].replace(",", ""))) for b in blocks])


def warm_up(broker: KafkaBroker) -> None:
    """A few cleaning rounds of a small topic, so the cleaner's code is compiled before the
    measured log (same JVM: a restart would lose it)."""
    broker.create_topic(WARM_TOPIC, WARM_CONFIGS)
    producer = broker.producer(linger_ms=5, batch_size=64 * 1024)
    value = b"v" * 100
    try:
        for _ in range(WARM_ROUNDS):
            for i in range(WARM_RECORDS):
                producer.send(WARM_TOPIC, key=b"warm-%012d" % (i % WARM_KEYS), value=value)
            producer.flush()
            broker.wait_cleaned(WARM_TOPIC)
    finally:
        producer.close()


def set_configs(broker: KafkaBroker, topic: str, configs: dict[str, str]) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = broker.admin()
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs)])
    finally:
        admin.close()


def clean_with_kafka(work: Path, libs: Path, source: Path, timeout_s: float) -> KafkaStats:
    """Create the topic (held: not compacted), install our log under the stopped broker,
    restart, warm the JVM up, turn the log's policy to compact and wait until it is cleaned to
    its active segment."""
    broker = FullJitBroker(work / "kafka", libs, overrides={"log.cleaner.threads": "1"})
    try:
        broker.start()
        broker.create_topic("t", HELD_CONFIGS)
        broker.stop()
        install_partition(broker, "t", 0, source)
        broker.start()
        warm_up(broker)
        set_configs(broker, "t", TOPIC_CONFIGS)
        broker.wait_cleaned("t", timeout_s=timeout_s)
        stats = parse_kafka_stats(broker.cleaner_log.read_text(), "t-0")
        if stats is None:
            raise SystemExit(f"Kafka cleaned t-0 but its statistics are not in {broker.cleaner_log}")
        return stats
    finally:
        broker.stop()
        broker.kill()


def clean_ours(root: Path) -> tuple[float, object]:
    with LogManager([root]) as manager:
        log = manager.get_log("t", 0)
        cleaner = LogCleaner(manager).cleaner
        start = time.perf_counter()
        report = cleaner.clean(log, now_ms=NOW, force=True)
        return time.perf_counter() - start, report


def _bounded(kind: type, low: float, high: float | None = None, *, low_open: bool = False):
    """An argparse type: a ``kind`` number from ``low`` (excluded when ``low_open``) to ``high``,
    refused in one line before anything is generated (0 MB made a log with no segment, and a
    traceback at its end)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (low < value if low_open else low <= value) or (high is not None and not value <= high):  # NaN too
            where = f"{'(' if low_open else '['}{low}, {high if high is not None else 'inf'}{']' if high is not None else ')'}"
            raise argparse.ArgumentTypeError(f"{text} is not in {where}")
        return value
    return parse


def _existing_dir(text: str) -> Path:
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not an existing directory")
    return Path(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=_bounded(int, 1), default=200, help="log size in MB, at least 1")
    ap.add_argument("--value-size", type=_bounded(int, 0), default=100, help="bytes per value, at least 0")
    ap.add_argument("--live-fraction", type=_bounded(float, 0.0, 1.0, low_open=True), default=0.01,
                    help="distinct keys per record, in (0, 1]; 1 makes every key distinct")
    ap.add_argument("--dir", type=_existing_dir, default=None, help="an existing scratch folder (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--timeout", type=_bounded(float, 0.0, low_open=True), default=600,
                    help="seconds to wait for Kafka's cleaner, above 0")
    args = ap.parse_args()
    try:  # before a log is generated: without Kafka there is nothing to compare with
        libs = kafka_distribution()
    except (KafkaUnavailable, KafkaBrokerError) as exc:
        sys.exit(f"error: {exc}")
    work = Path(tempfile.mkdtemp(prefix="bench-kafka-cleaner-", dir=args.dir))
    try:
        ours_root, kafka_source = work / "ours", work / "source"
        info = generate(ours_root, args.size_mb * MB, args.value_size, args.live_fraction)
        shutil.copytree(ours_root, kafka_source)
        ours_s, report = clean_ours(ours_root)
        kafka = clean_with_kafka(work, libs, kafka_source, args.timeout)
        stats = report.stats
        mb = info["bytes"] / MB
        keys = info["keys"]
        print(f"log: {mb:.0f} MB, {info['records']:,} records, {keys:,} keys, {info['segments']} segments, "
              f"{args.value_size}-byte values")
        rounds = ", ".join(f"{start:,} -> {end:,}" for start, end in kafka.messages)
        print(f"kafka: {kafka.rounds} round(s), warm JVM; {kafka.elapsed_s:.1f} s by its stats "
              f"({kafka.mb_read / max(kafka.elapsed_s, 1e-9):.1f} MB/s over {kafka.mb_read:.0f} MB read), "
              f"{kafka.wall_s:.2f} s from its log's timestamps; indexing {kafka.index_s:.1f} s, "
              f"cleaning {kafka.clean_s:.1f} s; messages per round {rounds}")
        print(f"ours: {ours_s:.2f} s ({mb / ours_s:.1f} MB/s, {info['records'] / ours_s / 1e3:.0f}k records/s); "
              f"map building {stats.index_seconds:.2f} s, recopy {stats.clean_seconds:.2f} s, "
              f"header scan {stats.scan_seconds:.2f} s, swap {stats.swap_seconds:.2f} s; "
              f"{stats.records_read:,} -> {stats.records_written:,} records")
        print(f"ratio: ours / Kafka = {ours_s / kafka.wall_s:.2f}x the time (goal: <= {GOAL}x Kafka's time, "
              f"{'met' if ours_s <= GOAL * kafka.wall_s else 'not met'})")
        slots = DEDUPE_BUFFER // KAFKA_BYTES_PER_ENTRY
        print(f"kafka memory: {KAFKA_BYTES_PER_ENTRY} B/key, dedupe buffer {DEDUPE_BUFFER // MB} MiB = {slots:,} slots "
              f"({int(slots * LOAD_FACTOR):,} keys at load factor {LOAD_FACTOR}); buffer utilization "
              f"{kafka.buffer_utilization:.1%} ({keys:,} keys / {slots:,} slots = {keys / slots:.1%})")
        per_key = OffsetMap.capacity_for(1_000_000, 16) / 1_000_000  # the core in use, 16-byte keys
        print(f"ours memory ({native.status().name} core): {per_key:.1f} B/key (16-byte keys), "
              f"{per_key / KAFKA_BYTES_PER_ENTRY:.1f}x Kafka's; the same {DEDUPE_BUFFER // MB} MiB holds "
              f"{int(DEDUPE_BUFFER * LOAD_FACTOR / per_key):,} keys; passes {report.passes}")
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
