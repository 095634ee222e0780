"""Record-level facts a compaction must preserve, read by the engine in Spark tasks.

The platform's asset checks (``platform_assets/defs/checks.py``) compare these before and after a cleaning. One task reads each
partition whole with the engine (packed per task like the compaction's whole partitions:
``spark_jobs.distribute``), and returns, per key, its latest record's offset, whether that
record is a tombstone and a 64-bit hash of key and value, plus how many records of each key lie
in the cleaned range:

* **latest values**: for every key, the value of its latest record. A correct compaction keeps
  exactly those (the cleaner removes superseded records, never the newest one of a key). A key
  whose latest record is a tombstone counts as absent, so removing the tombstone after
  ``delete.retention.ms`` does not change the digest. Records appended while the run cleans are
  left out (both sides stop at the log end offset seen before), and so are records below the log
  start offset after the run (retention of ``compact,delete`` topics deletes whole old segments;
  that is retention's job, not a lost key). The digest is the number of live keys and the XOR of
  the hash of each (key, latest value): order-independent. The before side is kept on the
  driver as three arrays (17 bytes per key) while the cleaning rewrites the files.
* **duplicate keys in the cleaned range**: after a cleaning, ``[log start, cleaner checkpoint)``
  holds at most one record per key.
* Under a version compaction strategy (``compaction.strategy``, KIP-280) a key's "latest"
  record is its winner, the highest ``(version, offset)`` (``strategy.VersionRule``), and the
  record just below the checkpoint (the newest of the last pass, kept whatever its version) is
  not counted as a duplicate.
* **offsets and indexes**: the engine's ``verify_log`` (CRCs, offsets strictly increasing within
  and across batches and segments, both indexes pointing at real batches and timestamps), run
  in the same task, with its problems split by the file they concern.

Records are read as Kafka's consumers read them by default in Spark's Kafka source
(``read_uncommitted``): control records are skipped, records of aborted transactions are not,
so on transactional topics the latest-value digest can differ for a key whose newest record
was aborted, which the cleaner rightly removes.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from storage_engine.cleaner import Winners, version_rule
from storage_engine.config.topic import LogConfig
from storage_engine.errors import LogError
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch
from storage_engine.remote.access import open_store
from storage_engine.remote.location import RemoteLocation
from storage_engine.remote.reads import tiered_log
from storage_engine.tools.verify import VerifyReport, verify_partition

from .distribute import each, pack, run_tasks, task_slots
from .remote_tier import job_location

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
    error: str | None = None  # the read stopped early: the facts cover what came before


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


def _verification(report: VerifyReport) -> Verification:
    log_problems, index_problems = split_problems(report.problems)
    return Verification(report.records, log_problems, index_problems)


@dataclass
class KeyFacts:
    """One partition's keys, each by its latest record below the end read: parallel arrays of
    that record's offset, its (key, value) hash and whether it is live (not a tombstone); the
    duplicates in the cleaned range; and the engine's verification when it was asked for."""

    offsets: array
    hashes: array
    live: bytes
    duplicates: Duplicates = Duplicates()
    verification: Verification | None = None
    error: str | None = None  # why the read stopped early (a damaged batch): the facts cover what came before

    def digest(self, from_offset: int = 0) -> Digest:
        """The live keys whose latest record is at or above ``from_offset``."""
        keys = xor = 0
        for offset, h, live in zip(self.offsets, self.hashes, self.live, strict=True):
            if live and offset >= from_offset:
                keys += 1
                xor ^= h
        return Digest(keys, xor)


@dataclass(frozen=True)
class FactsTask:
    """A partition to read: where, up to which offset, and what range the cleaner has cleaned."""

    log_dir: str
    topic: str
    partition: int
    ending: int
    cleaned_end: int
    size_bytes: int
    verify: bool
    # the broker defaults the cleaner ran with (``log.cleaner.compaction.strategy``, say): the
    # checks judge each key's winner by the same rule
    broker_props: Mapping[str, str]
    configs: Mapping[str, LogConfig]  # every topic's, resolved over every log dir (``LogManager.topic_configs``)
    location: RemoteLocation | None = None  # a tiered topic's remote tier, as the driver resolved it


def record_hash(key: bytes, value: bytes) -> int:
    """A 64-bit hash of a key and its value (length-prefixed, so no two pairs share an input)."""
    data = len(key).to_bytes(4, "big") + key + value
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def read_key_facts(task: FactsTask) -> tuple[int, KeyFacts]:
    """Read one partition from its log start up to ``task.ending`` (read-only, as a consumer)."""
    latest: dict[bytes, tuple[int, int, bool]] = {}
    in_cleaned: dict[bytes, int] = {}
    error = None
    with LogManager([Path(task.log_dir)], dict(task.broker_props), read_only=True,
                    topic_configs=task.configs) as manager:
        log = manager.get_log(task.topic, task.partition)
        rule = version_rule(log.config.compaction_strategy, log.config.compaction_strategy_header)
        winners = Winners(rule) if rule is not None else None
        exempt = task.cleaned_end - 1 if rule is not None else -1
        store = open_store(task.location) if task.location is not None else None
        try:  # a tiered partition is read across its tiers, as a consumer reads it
            view = tiered_log(log, store=store)
            start = view.log_start_offset
            for raw in view.batches_from(start):
                if raw.header.base_offset >= task.ending:
                    break
                if raw.header.magic >= 2 and raw.header.is_control:
                    continue
                for r in decode_batch(raw, path=view.segment_path(raw.header.base_offset)):
                    if r.key is None or r.offset < start or r.offset >= task.ending:
                        continue
                    if r.offset < task.cleaned_end and r.offset != exempt:
                        in_cleaned[r.key] = in_cleaned.get(r.key, 0) + 1
                    if winners is not None and winners.offer(r) is not None:
                        continue  # lost to the key's winner so far
                    live = r.value is not None
                    latest[r.key] = (r.offset, record_hash(r.key, r.value) if live else 0, live)
        except LogError as exc:  # the cleaning and the verification name it; the other partitions go on
            error = str(exc)
        verification = (_verification(verify_partition(manager, task.topic, task.partition, store))
                        if task.verify else None)
    entries = sorted(latest.values())
    repeated = [n for n in in_cleaned.values() if n > 1]
    return task.partition, KeyFacts(array("q", (e[0] for e in entries)), array("Q", (e[1] for e in entries)),
                                    bytes(e[2] for e in entries), Duplicates(len(repeated), sum(repeated)),
                                    verification, error)


def key_facts(spark, log_dirs: Sequence[str], topic: str, ending: Mapping[int, int], *,
              broker_props: Mapping[str, str], cleaned_end: Mapping[int, int] | None = None,
              verify: bool = False) -> dict[int, KeyFacts]:
    """:class:`KeyFacts` of each partition of ``topic`` in ``ending`` over ``[log start,
    ending[p])``, partitions packed per Spark task by size, under the broker defaults the
    cleaner ran with; ``verify`` adds the engine's verification of each."""
    if not ending:
        return {}
    with LogManager(list(log_dirs), dict(broker_props), read_only=True) as manager:
        stats = {s.partition: s for s in manager.partition_stats(topic, {(topic, p) for p in ending})}
        configs = manager.topic_configs()
    location = job_location() if configs[topic].remote_storage_enable else None
    tasks = [FactsTask(str(Path(s.directory).parent), topic, p, int(ending[p]), int((cleaned_end or {}).get(p, 0)),
                       s.size_bytes, verify, dict(broker_props), configs, location) for p, s in sorted(stats.items())]
    packed = pack(tasks, lambda t: t.size_bytes, task_slots(spark))
    return dict(run_tasks(spark, packed, each(read_key_facts)))


def summarize(facts: Mapping[int, KeyFacts], *, from_offsets: Mapping[int, int] | None = None
              ) -> dict[int, PartitionFacts]:
    """Per-partition digest of the live keys (only keys whose latest offset is at least
    ``from_offsets[p]`` when given) and duplicates in the cleaned range."""
    return {p: PartitionFacts(f.digest((from_offsets or {}).get(p, 0)), f.duplicates, f.error) for p, f in facts.items()}
