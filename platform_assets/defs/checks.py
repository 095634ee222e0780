"""Asset checks on every compaction of a topic asset, and how their results are emitted.

Every topic carries ``log_health`` (``health.py``): does the partition need cleaning, and why.
Compacted topics carry four more checks, evaluated on each partition a run compacted (computed by
``check_facts``; the asset runs them in the same step so they can compare with what it read
before cleaning):

* ``keys_unique_in_cleaned_range``: no key appears twice below the new cleaner checkpoint;
* ``offsets_strictly_increase``: the engine's verification of every batch and record offset;
* ``indexes_agree_with_log``: every offset and time index entry points at a real batch;
* ``latest_values_preserved``: the digest of every key's latest value is the same before and
  after (see ``check_facts`` for what is compared).

The check specs are partitioned like the asset, so the UI shows each partition's latest result.
Partitioned check specs are a *preview* feature of Dagster 1.13 and warn once per definition;
that warning is silenced here, where the choice is made, not globally.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (  # not re-exported by dagster
    AssetCheckEvaluationTargetMaterializationData,
)

from ..logic.catalog import Topic
from ..logic.check_facts import Digest, Duplicates, Verification
from ..logic.log_state import PartitionState
from .partitions import partition_key, topic_partitions_def

KEYS_UNIQUE = "keys_unique_in_cleaned_range"
OFFSETS_INCREASE = "offsets_strictly_increase"
INDEXES_AGREE = "indexes_agree_with_log"
LATEST_VALUES = "latest_values_preserved"
HEALTH_CHECK = "log_health"  # every topic: evaluated from the state (``health.py``)

DESCRIPTIONS = {
    KEYS_UNIQUE: "After a compaction, no key appears twice in [log start offset, cleaner checkpoint).",
    OFFSETS_INCREASE: "Record offsets strictly increase within and across batches and segments (engine verify).",
    INDEXES_AGREE: "Offset and time index entries point at real batches, offsets and timestamps (engine verify).",
    LATEST_VALUES: "Every key's latest value before the compaction is still its latest value after it "
    "(a digest of the live keys compared before and after).",
    HEALTH_CHECK: "Whether the partition needs cleaning and why: ERROR when max.compaction.lag.ms is overdue "
    "(an erasure deadline at risk), WARN when the dirty ratio is above min.cleanable.dirty.ratio or "
    "retention has deletable segments. Evaluated by log_state_sensor whenever the verdict changes, and "
    "after every cleaning.",
}
MAX_PROBLEMS_SHOWN = 20


def log_asset_key(topic: str) -> dg.AssetKey:
    return dg.AssetKey(["logs", topic])


def check_specs(topic: Topic) -> list[dg.AssetCheckSpec]:
    """The checks of a topic's asset: ``log_health`` for every topic, and the four compaction
    checks above for compacted topics."""
    names = [HEALTH_CHECK] + ([KEYS_UNIQUE, OFFSETS_INCREASE, INDEXES_AGREE, LATEST_VALUES] if topic.compact else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(name, asset=log_asset_key(topic.name), description=DESCRIPTIONS[name],
                              partitions_def=topic_partitions_def(topic.name))
            for name in names
        ]


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


def evaluations(asset_key: dg.AssetKey, outcomes: Sequence[CheckOutcome],
                targets: Mapping[str, AssetCheckEvaluationTargetMaterializationData] | None = None
                ) -> list[dg.AssetCheckEvaluation]:
    """Outcomes as per-partition evaluations (logged by a range run, recorded by the state
    sensor); ``targets`` ties each partition's evaluation to the materialization it checked."""
    targets = targets or {}
    return [dg.AssetCheckEvaluation(asset_key=asset_key, check_name=o.name, passed=o.passed, description=o.shown,
                                    metadata=o.metadata, severity=o.severity, partition=partition_key(o.partition),
                                    target_materialization_data=targets.get(partition_key(o.partition)))
            for o in outcomes]


def run_materializations(instance: dg.DagsterInstance, asset_key: dg.AssetKey, run_id: str,
                         partitions: Sequence[str]) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """The materialization this run recorded for each of ``partitions``, as a check's target:
    what Dagster fills in itself only for a single-partition run's yielded results."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=list(partitions)), limit=4 * len(partitions) + 10
    ).records
    out: dict[str, AssetCheckEvaluationTargetMaterializationData] = {}
    for r in records:  # newest first
        if r.run_id == run_id and r.partition_key is not None:
            out.setdefault(r.partition_key, AssetCheckEvaluationTargetMaterializationData(
                storage_id=r.storage_id, run_id=r.run_id, timestamp=r.timestamp))
    return out
