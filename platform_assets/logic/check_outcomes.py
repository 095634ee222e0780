"""The checks' verdicts: each check's name, and the outcome of each check on each partition.

Every topic carries ``log_health`` (``health.py``): does the partition need cleaning, and why;
and ``topic_health`` (``topic_health.py``), unpartitioned: the rollup of its partitions' ``log_health``.
Compacted topics carry four more checks, evaluated on each partition a run compacted (computed by
``spark_jobs.reads``; the asset runs them in the same step so they can compare with what it read
before cleaning):

* ``keys_unique_in_cleaned_range``: no key appears twice below the new cleaner checkpoint;
* ``offsets_strictly_increase``: the engine's verification of every batch and record offset;
* ``indexes_agree_with_log``: every offset and time index entry points at a real batch;
* ``latest_values_preserved``: the digest of every key's latest value is the same before and
  after (see ``spark_jobs.reads`` for what is compared).

``defs/checks.py`` turns them into Dagster's check specs and evaluations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from spark_jobs.reads import Digest, Duplicates, Verification

from .log_state import PartitionState
from .partition_keys import partition_key

KEYS_UNIQUE = "keys_unique_in_cleaned_range"


OFFSETS_INCREASE = "offsets_strictly_increase"


INDEXES_AGREE = "indexes_agree_with_log"


LATEST_VALUES = "latest_values_preserved"


HEALTH_CHECK = "log_health"  # every topic: evaluated from the state (``health.py``)


TOPIC_HEALTH = "topic_health"  # every topic, unpartitioned: the rollup of its log_health (``topic_health.py``)


MAX_PROBLEMS_SHOWN = 20


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    partition: int
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR  # how a failure shows

    @property
    def shown(self) -> str:
        """The description as recorded: it names the partition, since Dagster's run log line for a
        check result names only the asset and the check."""
        return f"partition {partition_key(self.partition)}: {self.description}"


def _problems(problems: Sequence[str]) -> dict[str, Any]:
    shown = list(problems[:MAX_PROBLEMS_SHOWN])
    more = len(problems) - len(shown)
    text = "\n".join(f"* {p}" for p in shown) + (f"\n* ... {more} more" if more else "")
    return {"problems": len(problems), **({"details": dg.MetadataValue.md(text)} if problems else {})}


def evaluate_checks(partition: int, after: PartitionState, duplicates: Duplicates, verification: Verification,
                    digests: tuple[Digest, Digest] | None, read_error: str | None = None) -> list[CheckOutcome]:
    """One partition's check outcomes; ``digests`` is (before, after), or ``None`` when there is
    no before (checks run on their own), which leaves the latest-value check out. A read that
    stopped at a damaged batch (``read_error``) fails the comparison: its digests cover only
    what came before the damage."""
    cleaned = (f"[{after.log_start_offset}, {after.cleaner_checkpoint})" if after.cleaner_checkpoint is not None
               else "none (never cleaned)")
    out = [
        CheckOutcome(KEYS_UNIQUE, partition, duplicates.keys == 0,
                     f"{duplicates.keys} key(s) appear more than once in the cleaned range, {cleaned}",
                     {"duplicate_keys": duplicates.keys, "extra_records": duplicates.extra_records,
                      "cleaned_range": cleaned}),
        CheckOutcome(OFFSETS_INCREASE, partition, not verification.offset_problems,
                     f"{len(verification.offset_problems)} offset or batch problem(s) in {verification.records} records",
                     {"records": verification.records, **_problems(verification.offset_problems)}),
        CheckOutcome(INDEXES_AGREE, partition, not verification.index_problems,
                     f"{len(verification.index_problems)} index problem(s)",
                     _problems(verification.index_problems)),
    ]
    if digests is not None and read_error is not None:
        out.append(CheckOutcome(LATEST_VALUES, partition, False,
                                f"not compared: reading the log stopped at a damaged batch: {read_error}",
                                {"read_error": read_error}))
    elif digests is not None:
        before, after_digest = digests
        out.append(CheckOutcome(
            LATEST_VALUES, partition, before == after_digest,
            f"latest values before: {before.to_text()}; after: {after_digest.to_text()}",
            {"live_keys_before": before.keys, "live_keys_after": after_digest.keys,
             "digest_before": before.to_text(), "digest_after": after_digest.to_text()},
        ))
    return out
