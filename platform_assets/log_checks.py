"""Record-level facts a compaction must preserve, computed with Spark and the engine.

The asset checks (``checks.py``) compare these before and after a cleaning:

* **latest values**: for every key, the value of its latest record. A correct compaction keeps
  exactly those (the cleaner removes superseded records, never the newest one of a key). A key
  whose latest record is a tombstone counts as absent, so removing the tombstone after
  ``delete.retention.ms`` does not change the digest. Records appended while the run cleans are
  left out (both sides stop at the log end offset seen before), and so are records below the log
  start offset after the run (retention of ``compact,delete`` topics deletes whole old segments;
  that is retention's job, not a lost key). The digest is the number of live keys and the XOR of
  a 64-bit hash of each (key, latest value): order-independent and computed by Spark's
  aggregation, so no key set has to fit in the driver.
* **duplicate keys in the cleaned range**: after a cleaning, ``[log start, cleaner checkpoint)``
  holds at most one record per key.
* **offsets and indexes**: the engine's ``verify_log`` (CRCs, offsets strictly increasing within
  and across batches and segments, both indexes pointing at real batches and timestamps), with
  its problems split by the file they concern.

Reads go through the ``kafka-log`` data source, which skips control records as Kafka's consumers
do but returns records of aborted transactions (Spark's Kafka source default,
``read_uncommitted``): on transactional topics with aborted transactions the latest-value
digest can differ for a key whose newest record was aborted, which the cleaner rightly removes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from typing import Mapping, Sequence

from storage_engine.manager import LogManager
from storage_engine.verify import VerifyReport, verify_log

INDEX_SUFFIXES = (".index", ".timeindex")


@dataclass(frozen=True)
class Digest:
    """Live keys (latest record not a tombstone) and the XOR of their (key, value) hashes."""

    keys: int = 0
    xor: int = 0

    def to_text(self) -> str:
        return f"{self.keys} keys, xor {self.xor & 0xFFFFFFFFFFFFFFFF:016x}"


def read_records(spark, log_dirs: Sequence[str], topic: str, partitions: Sequence[int],
                 *, ending: Mapping[int, int] | None = None):
    """The records of ``partitions`` of ``topic`` through the ``kafka-log`` source, each partition
    read up to ``ending[p]`` (exclusive) when given."""
    reader = (spark.read.format("kafka-log")
              .option("topics", topic)
              .option("partitions", ",".join(str(p) for p in sorted(partitions))))
    if ending:
        reader = reader.option("endingOffsets", json.dumps({topic: {str(p): int(o) for p, o in ending.items()}}))
    return reader.load(",".join(log_dirs))


def latest_values(records):
    """One row per live key: ``partition``, ``latest_offset`` and ``h``, a hash of (key, value)."""
    from pyspark.sql import functions as F

    latest = (records.where(F.col("key").isNotNull())
              .groupBy("partition", "key")
              .agg(F.max("offset").alias("latest_offset"),
                   F.max_by(F.struct(F.col("value").isNull().alias("tombstone"),
                                     F.xxhash64("key", "value").alias("h")), "offset").alias("last")))
    return latest.where(~F.col("last.tombstone")).select("partition", "latest_offset", F.col("last.h").alias("h"))


def snapshot_latest_values(spark, log_dirs: Sequence[str], topic: str, ending: Mapping[int, int]):
    """:func:`latest_values` of the logs as they are now, materialized in Spark's block manager
    (``localCheckpoint``) so that it survives the cleaning that rewrites the files underneath."""
    records = read_records(spark, log_dirs, topic, list(ending), ending=ending)
    return latest_values(records).localCheckpoint(eager=True)


def digests(latest, *, from_offsets: Mapping[int, int] | None = None) -> dict[int, Digest]:
    """Per-partition :class:`Digest` of a :func:`latest_values` frame, keeping only keys whose
    latest offset is at least ``from_offsets[p]`` when given."""
    from pyspark.sql import functions as F

    frame = latest
    if from_offsets:
        conditions = [(F.col("partition") == p) & (F.col("latest_offset") >= o) for p, o in from_offsets.items()]
        frame = frame.where(reduce(lambda a, b: a | b, conditions))
    rows = frame.groupBy("partition").agg(F.count("*").alias("keys"), F.bit_xor("h").alias("xor")).collect()
    return {r["partition"]: Digest(r["keys"], r["xor"]) for r in rows}


@dataclass(frozen=True)
class Duplicates:
    keys: int = 0  # keys appearing more than once
    records: int = 0  # records of those keys

    @property
    def extra_records(self) -> int:
        return self.records - self.keys


def duplicate_keys(spark, log_dirs: Sequence[str], topic: str, cleaned_end: Mapping[int, int]) -> dict[int, Duplicates]:
    """Keys appearing more than once in ``[log start, cleaned_end[p])`` of each partition."""
    from pyspark.sql import functions as F

    if not cleaned_end:
        return {}
    records = read_records(spark, log_dirs, topic, list(cleaned_end), ending=cleaned_end)
    rows = (records.where(F.col("key").isNotNull())
            .groupBy("partition", "key").count().where(F.col("count") > 1)
            .groupBy("partition").agg(F.count("*").alias("keys"), F.sum("count").alias("records"))
            .collect())
    return {r["partition"]: Duplicates(r["keys"], r["records"]) for r in rows}


@dataclass(frozen=True)
class Verification:
    """``verify_log``'s problems split by the file they concern."""

    records: int
    offset_problems: tuple[str, ...]
    index_problems: tuple[str, ...]


def split_problems(problems: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(log problems, index problems): ``verify_log`` names the file first, and index problems
    name an ``.index`` or ``.timeindex`` file (or say the index is unreadable)."""
    index = tuple(p for p in problems if p.split(": ", 1)[0].endswith(INDEX_SUFFIXES) or "index unreadable" in p)
    log = tuple(p for p in problems if p not in index)
    return log, index


def verify_partitions(manager: LogManager, topic: str, partitions: Sequence[int]) -> dict[int, Verification]:
    """The engine's full verification of each partition (reads every byte; runs on the driver)."""
    out = {}
    for p in partitions:
        report: VerifyReport = verify_log(manager.get_log(topic, p))
        log_problems, index_problems = split_problems(report.problems)
        out[p] = Verification(report.records, log_problems, index_problems)
    return out
