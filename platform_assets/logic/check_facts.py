"""Record-level facts a compaction must preserve, computed with Spark and the engine.

The asset checks (``checks.py``) compare these before and after a cleaning; the after side of
the first two comes from one read and one aggregation (``key_table``):

* **latest values**: for every key, the value of its latest record. A correct compaction keeps
  exactly those (the cleaner removes superseded records, never the newest one of a key). A key
  whose latest record is a tombstone counts as absent, so removing the tombstone after
  ``delete.retention.ms`` does not change the digest. Records appended while the run cleans are
  left out (both sides stop at the log end offset seen before), and so are records below the log
  start offset after the run (retention of ``compact,delete`` topics deletes whole old segments;
  that is retention's job, not a lost key). The digest is the number of live keys and the XOR of
  a 64-bit hash of each (key, latest value): order-independent and computed by Spark's
  aggregation, so no key set has to fit in the driver. The before side is one row per key,
  kept by Spark (``localCheckpoint``) while the cleaning rewrites the files.
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
from typing import Mapping, Sequence

from storage_engine.manager import LogManager
from storage_engine.verify import VerifyReport, verify_partition

INDEX_SUFFIXES = (".index", ".timeindex")


@dataclass(frozen=True)
class Digest:
    """Live keys (latest record not a tombstone) and the XOR of their (key, value) hashes."""

    keys: int = 0
    xor: int = 0

    def to_text(self) -> str:
        return f"{self.keys} keys, xor {self.xor & 0xFFFFFFFFFFFFFFFF:016x}"


@dataclass(frozen=True)
class Duplicates:
    keys: int = 0  # keys appearing more than once in the cleaned range
    records: int = 0  # records of those keys there

    @property
    def extra_records(self) -> int:
        return self.records - self.keys


@dataclass(frozen=True)
class PartitionFacts:
    digest: Digest = Digest()
    duplicates: Duplicates = Duplicates()


def read_records(spark, log_dirs: Sequence[str], topic: str, ending: Mapping[int, int]):
    """The records of the partitions of ``topic`` named in ``ending``, each read from its log start
    up to ``ending[p]`` (exclusive), through the ``kafka-log`` source."""
    return (spark.read.format("kafka-log")
            .option("topics", topic)
            .option("partitions", ",".join(str(p) for p in sorted(ending)))
            .option("endingOffsets", json.dumps({topic: {str(p): int(o) for p, o in ending.items()}}))
            .load(",".join(log_dirs)))


def _per_partition(values: Mapping[int, int], default: int):
    """A column holding ``values[partition]`` (``default`` for a partition not in it)."""
    from pyspark.sql import functions as F

    if not values:
        return F.lit(default)
    pairs = [F.lit(x) for p, o in sorted(values.items()) for x in (p, o)]
    return F.coalesce(F.create_map(*pairs)[F.col("partition")], F.lit(default))


def key_table(spark, log_dirs: Sequence[str], topic: str, ending: Mapping[int, int],
              *, cleaned_end: Mapping[int, int] | None = None):
    """One row per (partition, key) over ``[log start, ending[p])``, in one read and one shuffle:
    ``latest_offset``, ``tombstone`` and ``h`` (a 64-bit hash of key and value) of the key's
    latest record, and ``in_cleaned``, how many of its records lie below ``cleaned_end[p]``."""
    from pyspark.sql import functions as F

    records = read_records(spark, log_dirs, topic, ending).where(F.col("key").isNotNull())
    below = F.col("offset") < _per_partition(cleaned_end or {}, 0)
    return (records.groupBy("partition", "key")
            .agg(F.max("offset").alias("latest_offset"),
                 F.max_by(F.struct(F.col("value").isNull().alias("tombstone"),
                                   F.xxhash64("key", "value").alias("h")), "offset").alias("last"),
                 F.count_if(below).alias("in_cleaned"))
            .select("partition", "latest_offset", F.col("last.tombstone").alias("tombstone"),
                    F.col("last.h").alias("h"), "in_cleaned"))


def snapshot_key_table(spark, log_dirs: Sequence[str], topic: str, ending: Mapping[int, int]):
    """:func:`key_table` of the logs as they are now, kept in Spark's block manager
    (``localCheckpoint``) so that it survives the cleaning that rewrites the files underneath.
    Only the hashes are kept, not the keys: about 30 bytes per key."""
    return key_table(spark, log_dirs, topic, ending).drop("in_cleaned").localCheckpoint(eager=True)


def summarize(table, *, from_offsets: Mapping[int, int] | None = None) -> dict[int, PartitionFacts]:
    """Per-partition digest of the live keys (keeping only keys whose latest offset is at least
    ``from_offsets[p]`` when given) and duplicates in the cleaned range, of a :func:`key_table`."""
    from pyspark.sql import functions as F

    frame = table
    if from_offsets:
        frame = frame.where(F.col("latest_offset") >= _per_partition(from_offsets, 0))
    if "in_cleaned" not in frame.columns:
        frame = frame.withColumn("in_cleaned", F.lit(0))
    live = ~F.col("tombstone")
    dup = F.col("in_cleaned") > 1
    rows = (frame.groupBy("partition")
            .agg(F.count_if(live).alias("keys"),
                 F.coalesce(F.bit_xor(F.when(live, F.col("h"))), F.lit(0)).alias("xor"),
                 F.count_if(dup).alias("dup_keys"),
                 F.coalesce(F.sum(F.when(dup, F.col("in_cleaned"))), F.lit(0)).alias("dup_records"))
            .collect())
    return {r["partition"]: PartitionFacts(Digest(r["keys"], r["xor"]), Duplicates(r["dup_keys"], r["dup_records"]))
            for r in rows}


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
        report: VerifyReport = verify_partition(manager, topic, p)
        log_problems, index_problems = split_problems(report.problems)
        out[p] = Verification(report.records, log_problems, index_problems)
    return out
