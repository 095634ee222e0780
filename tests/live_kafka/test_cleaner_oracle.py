"""Kafka's LogCleaner as the oracle of ours: the same log, cleaned by each, keeps the same records
in the same bytes.

The broker writes every topic's log with its cleaner off (``log.cleaner.enable=false``), stops
cleanly, and we copy its log dir: that copy is our input. It restarts with the cleaner on, cleans
each partition once (the dirty section ends at the active segment on both sides: the same
files), stops, and our :class:`LogCleaner` cleans the copy once with the same topic config.
Kafka's clock is read back from what it wrote: a tombstone batch's stamped delete horizon
(KIP-534) is its clock plus ``delete.retention.ms``, so our pass runs at that same ``now``.

A second round appends through the broker to the cleaned log (cleaner off again), copies it,
and lets both clean once more after the first round's horizons have passed: tombstones and
transaction markers are removed on that pass.

Every topic, uncompressed or lz4, gzip, zstd (Kafka recompresses a rebuilt batch with its Java
codecs, we with ours: the same bytes come out), must give byte-identical ``.log`` files, segment
for segment, and the same cleaner checkpoint, but for the one documented difference of
:func:`assert_same_as_kafka`. The gzip and zstd bytes are only identical when the two sides
deflate with the same library version (the JDK's zlib against Python's, zstd-jni's libzstd
against ``zstandard``'s): :func:`codec_versions` reads both, every failure names them, and where
they differ the decompressed records are compared instead and a warning says so.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard

from storage_engine.cleaner import LogCleaner
from storage_engine.config.broker import topic_log_config
from storage_engine.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch, scan_batches
from tests.helpers.kafka_broker import KafkaBroker

RETENTION_MS = 3000  # delete.retention.ms: the second round waits it out, so horizons have passed
COMMON = {"cleanup.policy": "compact", "internal.segment.bytes": "16384", "min.compaction.lag.ms": "0",
          "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(RETENTION_MS)}


@dataclass(frozen=True)
class Case:
    """One topic: its extra config and the producer's settings."""

    topic: str
    configs: dict
    producer: dict
    transactional: bool = False


CASES = (
    Case("plain", {}, {"enable_idempotence": True}),
    Case("nonidem", {}, {"enable_idempotence": False}),
    Case("txn", {}, {"transactional_id": "oracle-txn"}, transactional=True),
    Case("appendtime", {"message.timestamp.type": "LogAppendTime"}, {"enable_idempotence": True}),
    Case("lz4", {}, {"compression_type": "lz4"}),
    Case("gzip", {}, {"compression_type": "gzip"}),
    Case("zstd", {}, {"compression_type": "zstd"}),
)


def produce(broker: KafkaBroker, case: Case, seed: int, n: int) -> None:
    """``n`` records over 120 keys, ~10% tombstones, some headers, small batches (several per
    segment), and more until a segment rolled, so this round has something cleanable below the
    active segment; transactional cases commit and abort in turn, a few records per transaction."""
    rng = random.Random(seed)
    segments = len(list(broker.partition_dir(case.topic).glob("*.log")))
    producer = broker.producer(batch_size=600, linger_ms=2, **case.producer)
    try:
        if case.transactional:
            producer.init_transactions()
        i = 0
        while i < n or len(list(broker.partition_dir(case.topic).glob("*.log"))) == segments:
            if case.transactional:
                producer.begin_transaction()
            for _ in range(rng.randrange(3, 25)):
                key = f"key-{rng.randrange(120)}".encode()
                value = None if rng.random() < 0.1 else f"{seed}-{i}-".encode() * rng.randrange(1, 6)
                headers = [("h", str(i).encode())] if i % 5 == 0 else []
                producer.send(case.topic, key=key, value=value, headers=headers)
                i += 1
            producer.flush()  # before an abort, or the aborted records never reach the log
            if case.transactional:
                if rng.random() < 0.35:
                    producer.abort_transaction()
                else:
                    producer.commit_transaction()
    finally:
        producer.close()


def clean_with_kafka(broker: KafkaBroker, topics: list[str]) -> None:
    """Restart with the cleaner on, wait until it has cleaned each topic up to its active
    segment (the dirty section ours cleans too), stop."""
    broker.overrides["log.cleaner.enable"] = "true"
    broker.start()
    for topic in topics:
        broker.wait_cleaned(topic)
    broker.stop()
    broker.overrides["log.cleaner.enable"] = "false"


def kafka_clock(partition_dir: Path) -> int:
    """The ``now`` of Kafka's pass: the newest delete horizon it stamped, minus the retention."""
    horizons = [raw.header.delete_horizon_ms for f in partition_dir.glob("*.log")
                for raw in scan_batches(f.read_bytes()) if raw.header.delete_horizon_ms is not None]
    assert horizons, f"Kafka stamped no delete horizon in {partition_dir}"
    return max(horizons) - RETENTION_MS


def clean_ours(log_dir: Path, case: Case, now_ms: int) -> None:
    config = topic_log_config({}, {**{k: v for k, v in COMMON.items() if k != "internal.segment.bytes"},
                                   "segment.bytes": COMMON["internal.segment.bytes"], **case.configs})
    with LogManager([log_dir], topic_configs={case.topic: config}) as manager:
        report = LogCleaner(manager).compact(case.topic, 0, now_ms=now_ms, max_passes=1)
    assert report.passes == 1, report.to_dict()


@dataclass(frozen=True)
class CodecVersions:
    """The library each side compresses a codec with: equal versions give equal bytes."""

    ours: str
    kafka: str

    @property
    def same(self) -> bool:
        return self.ours == self.kafka

    def __str__(self) -> str:
        return f"ours {self.ours}, Kafka's {self.kafka}"


def _deflate_version(library: Path) -> str | None:
    """zlib's version from the ``deflate_copyright`` string every build of it carries."""
    found = re.search(rb"deflate (\d[\d.]*) Copyright", library.read_bytes()) if library.exists() else None
    return found.group(1).decode() if found else None


def jdk_zlib_version() -> str:
    """The zlib of ``java.util.zip``: the one the JDK's ``libzip.so`` bundles, else the system
    ``libz`` it links (Debian's and Ubuntu's OpenJDK)."""
    libzip = Path(shutil.which("java") or "java").resolve().parent.parent / "lib" / "libzip.so"
    bundled = _deflate_version(libzip)
    if bundled:
        return bundled
    ldd = subprocess.run(["ldd", str(libzip)], capture_output=True, text=True).stdout
    linked = re.search(r"libz\.so\S* => (\S+)", ldd)
    return (_deflate_version(Path(linked.group(1))) if linked else None) or "unknown"


def zstd_jni_version(libs: Path) -> str:
    """libzstd's version in zstd-jni's: its jar is ``zstd-jni-<libzstd>-<build>.jar``."""
    jars = [re.fullmatch(r"zstd-jni-(\d+\.\d+\.\d+)-.*\.jar", j.name) for j in libs.glob("zstd-jni-*.jar")]
    return next((m.group(1) for m in jars if m), "unknown")


def codec_versions(libs: Path) -> dict[str, CodecVersions]:
    return {"gzip": CodecVersions(f"zlib {zlib.ZLIB_RUNTIME_VERSION}", f"zlib {jdk_zlib_version()}"),
            "zstd": CodecVersions(f"libzstd {zstandard.ZSTD_VERSION[0]}.{zstandard.ZSTD_VERSION[1]}."
                                  f"{zstandard.ZSTD_VERSION[2]}", f"libzstd {zstd_jni_version(libs)}")}


def assert_same_as_kafka(kafka_dir: Path, our_dir: Path, case: Case, codec: CodecVersions | None) -> None:
    """Every cleaned ``.log`` byte-identical to Kafka's, but for one difference of ours, checked
    to be exactly it: the round's last batch, emptied, is kept as an empty header (the package
    docstring of ``storage_engine.cleaner``: the swap's last segment ends where the replaced
    range ended) where Kafka drops it unless it is its producer's last.

    ``codec``: the two sides' library versions of the case's codec (None: no library-dependent
    codec). Different versions deflate differently, so then the decompressed records are
    compared, segment for segment, and a warning says the bytes were not."""
    theirs, ours = sorted(kafka_dir.glob("*.log")), sorted(our_dir.glob("*.log"))
    assert [f.name for f in ours] == [f.name for f in theirs], "different segments"
    kafka_cp = read_checkpoint(kafka_dir.parent / CLEANER_OFFSET_CHECKPOINT)[(case.topic, 0)]
    our_cp = read_checkpoint(our_dir.parent / CLEANER_OFFSET_CHECKPOINT)[(case.topic, 0)]
    assert our_cp == kafka_cp
    assert txn_indexes(our_dir) == txn_indexes(kafka_dir), case.topic  # the cleaned segments' aborted transactions
    if codec is not None and not codec.same:
        warnings.warn(f"{case.topic}: {codec}: the versions differ, so the cleaned records are compared "
                      f"decompressed, not the bytes", stacklevel=2)
        for kafka_file, our_file in zip(theirs, ours, strict=True):
            assert records_of(our_file) == records_of(kafka_file), (case.topic, our_file.name, str(codec))
        return
    for kafka_file, our_file in zip(theirs, ours, strict=True):
        kafka_bytes, our_bytes = kafka_file.read_bytes(), our_file.read_bytes()
        if our_bytes == kafka_bytes:
            continue
        last = list(scan_batches(our_bytes))[-1]
        assert (last.header.records_count == 0 and last.header.last_offset + 1 == our_cp
                and our_bytes[:last.position] == kafka_bytes), (case.topic, our_file.name, str(codec), first_difference(
                    batches(kafka_file), batches(our_file)))


def txn_indexes(partition_dir: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(partition_dir.glob("*.txnindex"))}


def batches(segment: Path) -> list:
    """The segment's batches: the header and every record as a consumer reads it."""
    return [(raw.header, [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in decode_batch(raw)])
            for raw in scan_batches(segment.read_bytes())]


def records_of(segment: Path) -> list:
    """The segment's records as a consumer reads them, whatever bytes compress them."""
    return [record for _, records in batches(segment) for record in records]


def first_difference(theirs: list, ours: list) -> str:
    for (kh, krecs), (oh, orecs) in zip(theirs, ours, strict=False):
        if kh != oh or krecs != orecs:
            return f"first different batch: Kafka {kh} {krecs[:3]}, ours {oh} {orecs[:3]}"
    return f"Kafka {len(theirs)} batches, ours {len(ours)}"


@pytest.fixture(scope="module")
def oracle_broker(kafka_libs: Path, tmp_path_factory) -> KafkaBroker:
    broker = KafkaBroker(tmp_path_factory.mktemp("oracle"), kafka_libs, overrides={"log.cleaner.enable": "false"})
    broker.start()
    try:
        for case in CASES:
            broker.create_topic(case.topic, {**COMMON, **case.configs})
        yield broker
    finally:
        broker.stop()
        broker.kill()


def test_kafka_and_our_cleaner_keep_the_same_records_in_the_same_bytes(oracle_broker: KafkaBroker, tmp_path: Path):
    broker = oracle_broker
    topics = [c.topic for c in CASES]
    versions = codec_versions(broker.libs)
    for round_no, n in ((1, 800), (2, 200)):
        for case in CASES:
            produce(broker, case, seed=round_no * 100 + CASES.index(case), n=n)
        broker.stop()
        ours = tmp_path / f"round{round_no}"
        shutil.copytree(broker.log_dirs[0], ours)  # copy2: the segments' mtimes come too
        if round_no == 2:  # every first-round horizon passed before Kafka's second pass
            horizon = max(kafka_clock(broker.partition_dir(t)) for t in topics) + RETENTION_MS
            time.sleep(max(0.0, horizon / 1000 + 0.2 - time.time()))
        clean_with_kafka(broker, topics)
        for case in CASES:
            kafka_dir = broker.partition_dir(case.topic)
            clean_ours(ours, case, kafka_clock(kafka_dir))
            assert_same_as_kafka(kafka_dir, ours / f"{case.topic}-0", case,
                                 versions.get(case.producer.get("compression_type", "")))
        broker.start()
