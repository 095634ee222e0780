"""A realistic workload for the main job, the end-to-end tests and demos.

Topics of the three cleanup policies, written through the engine like any producer would:
keyed records with a skewed key popularity (a few hot keys updated again and again, a long tail
rarely), tombstones, headers, compressed batches, small ``segment.bytes`` so every partition has
many segments, and timestamps spread over the past hours so that time retention has segments
to delete. Deterministic for a given seed and clock.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from storage_engine.log.append_validation import ProducerRecord, build_batch
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class TopicWorkload:
    """What to write to each partition of one topic (created with ``configs`` when missing)."""

    name: str
    partitions: int
    configs: Mapping[str, str]
    records: int  # per partition
    keys: int  # distinct keys per partition; popularity is skewed (key = n * u**3)
    tombstone_ratio: float = 0.0
    value_bytes: int = 100
    age_ms: int = HOUR_MS  # timestamps run evenly from now - age_ms to now
    batch_records: int = 50
    compression: CompressionType = CompressionType.LZ4
    partition_records: Mapping[int, int] = field(default_factory=dict)  # per-partition overrides of ``records``

    def records_for(self, partition: int) -> int:
        return self.partition_records.get(partition, self.records)


def realistic_workload(scale: float = 1.0) -> list[TopicWorkload]:
    """The main job's workload: a compacted changelog, a compacted-and-expiring profile store
    and an expiring event stream. ``scale`` multiplies the record counts."""

    def n(x: int) -> int:
        return max(1, int(x * scale))

    return [
        TopicWorkload(
            "orders.state", 3,
            {"cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.5",
             "delete.retention.ms": "600000", "index.interval.bytes": "4096"},
            records=n(24_000), keys=n(3_000), tombstone_ratio=0.04, value_bytes=120, age_ms=2 * HOUR_MS,
            partition_records={2: n(1_500)},  # a quiet partition: cleanable, but below the dirty ratio after a run
        ),
        TopicWorkload(
            "user-profiles", 2,
            {"cleanup.policy": "compact,delete", "segment.bytes": "32768", "min.cleanable.dirty.ratio": "0.3",
             "retention.ms": str(4 * HOUR_MS), "delete.retention.ms": "600000"},
            records=n(12_000), keys=n(1_500), tombstone_ratio=0.08, value_bytes=200, age_ms=6 * HOUR_MS,
            compression=CompressionType.ZSTD,
        ),
        TopicWorkload(
            "clickstream", 4,
            {"cleanup.policy": "delete", "segment.bytes": "65536", "retention.ms": str(HOUR_MS)},
            records=n(15_000), keys=n(50_000), value_bytes=80, age_ms=3 * HOUR_MS, batch_records=200,
            compression=CompressionType.SNAPPY,
        ),
    ]


def tiered_workload(scale: float = 1.0) -> TopicWorkload:
    """The main job's tiered topic (``remote.storage.enable``): a compacted ledger whose rolled
    segments the tiering sensor copies to the object store; local copies are kept for the
    topic's retention (``local.retention.ms`` -2)."""
    return TopicWorkload(
        "payments.ledger", 2,
        {"cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.5",
         "delete.retention.ms": "600000", "remote.storage.enable": "true"},
        records=max(1, int(8_000 * scale)), keys=max(1, int(1_000 * scale)), tombstone_ratio=0.04, value_bytes=120,
        age_ms=HOUR_MS,
    )


@dataclass
class WrittenPartition:
    topic: str
    partition: int
    records: int
    tombstones: int
    bytes: int


def _records(w: TopicWorkload, partition: int, count: int, now_ms: int, rng: random.Random) -> list[ProducerRecord]:
    first_ts = now_ms - w.age_ms
    step = w.age_ms / max(count, 1)
    out = []
    for i in range(count):
        key = f"{w.name}-k{int(w.keys * rng.random() ** 3)}".encode()
        tombstone = rng.random() < w.tombstone_ratio
        # hex of random bytes: compresses about as well as real JSON payloads (roughly half)
        value = None if tombstone else (f'{{"p":{partition},"i":{i},"d":"'.encode()
                                         + rng.randbytes(w.value_bytes // 2).hex().encode())[: w.value_bytes]
        out.append(ProducerRecord(key, value, int(first_ts + i * step), (("source", b"workload"),)))
    return out


def produce(manager: LogManager, workloads: Sequence[TopicWorkload], *, now_ms: int, seed: int = 7
            ) -> list[WrittenPartition]:
    """Create the topics that are missing, then append each partition's records in batches.
    Every batch is validated first, against the config its topic has (or will be created with),
    so a workload a topic refuses (a ``segment.bytes`` altered below a batch) writes nothing,
    not even to the topics before it."""
    rng = random.Random(seed)
    existing = set(manager.topics())
    planned = []
    for w in workloads:
        config = manager.topic_config(w.name) if w.name in existing else manager.admin.creation_config(w.name, w.configs)
        for p in range(w.partitions):
            records = _records(w, p, w.records_for(p), now_ms, rng)
            batches = [records[i:i + w.batch_records] for i in range(0, len(records), w.batch_records)]
            for batch in batches:
                build_batch(batch, base_offset=0, config=config, compression=w.compression, now_ms=now_ms,
                            tp=f"{w.name}-{p}")
            planned.append((w, p, records, batches))
    written = []
    for w, p, records, batches in planned:
        if w.name not in existing:
            manager.admin.create_topic(w.name, w.partitions, dict(w.configs))
            existing.add(w.name)
        log = manager.get_log(w.name, p)
        size = sum(log.append(batch, compression=w.compression).size_bytes for batch in batches)
        written.append(WrittenPartition(w.name, p, len(records), sum(r.value is None for r in records), size))
    return written
