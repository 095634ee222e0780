"""Asset checks on every compaction of a topic asset (``logic/check_outcomes.py``: the checks
and their verdicts), as Dagster's check specs and evaluations.

The check specs are partitioned like the asset, so the UI shows each partition's latest result,
except ``topic_health``: one result per topic, the rollup of its partitions' ``log_health``
(``logic/topic_health.py``), which every checks screen shows alike. Partitioned check specs are
a *preview* feature of Dagster 1.13 and warn once per definition; that warning is silenced here,
where the choice is made, not globally.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (  # not re-exported by dagster
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.events import DagsterEvent, DagsterEventType  # not re-exported by dagster
from dagster._core.instance.utils import RUNLESS_JOB_NAME

from ..logic.catalog import Topic
from ..logic.check_outcomes import (
    HEALTH_CHECK,
    INDEXES_AGREE,
    KEYS_UNIQUE,
    LATEST_VALUES,
    OFFSETS_INCREASE,
    TOPIC_HEALTH,
    CheckOutcome,
)
from ..logic.metadata import identity_metadata
from ..logic.partition_keys import partition_key
from .partitions import topic_partitions_def

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
    TOPIC_HEALTH: "The topic in one result, the same on every screen: the rollup of its partitions' current "
    "log_health (what the log_health Partitions view shows): failed ERROR when any partition's is an ERROR, "
    "failed WARN when any is a WARN, passed otherwise, naming the worst partitions and why. Recorded by "
    "log_state_sensor whenever it changes.",
}


def log_asset_key(topic: str) -> dg.AssetKey:
    return dg.AssetKey(["logs", topic])


def check_specs(topic: Topic) -> list[dg.AssetCheckSpec]:
    """The checks of a topic's asset: ``log_health`` and its rollup ``topic_health`` (not
    partitioned) for every topic, and the four compaction checks above for compacted topics."""
    names = [HEALTH_CHECK] + ([KEYS_UNIQUE, OFFSETS_INCREASE, INDEXES_AGREE, LATEST_VALUES] if topic.compact else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(name, asset=log_asset_key(topic.name), description=DESCRIPTIONS[name],
                              partitions_def=topic_partitions_def(topic.name))
            for name in names
        ] + [dg.AssetCheckSpec(TOPIC_HEALTH, asset=log_asset_key(topic.name), description=DESCRIPTIONS[TOPIC_HEALTH])]


def evaluations(asset_key: dg.AssetKey, outcomes: Sequence[CheckOutcome],
                targets: Mapping[str, AssetCheckEvaluationTargetMaterializationData] | None = None
                ) -> list[dg.AssetCheckEvaluation]:
    """Outcomes as per-partition evaluations (logged by a range run, recorded by the state
    sensor), each naming its topic and partition in its metadata too; ``targets`` ties each
    partition's evaluation to the materialization it checked."""
    targets = targets or {}
    return [dg.AssetCheckEvaluation(asset_key=asset_key, check_name=o.name, passed=o.passed, description=o.shown,
                                    metadata={**identity_metadata(asset_key.path[-1], o.partition), **o.metadata},
                                    severity=o.severity, partition=partition_key(o.partition),
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


def verdict_metadata(outcome: CheckOutcome) -> dict[str, object]:
    """A ``log_health`` verdict as observation metadata: the state sensor's observation of a
    change carries it, so every verdict stays in the partition's event history, each on its own
    (observations are never deduplicated or replaced)."""
    level = "passed" if outcome.passed else outcome.severity.value.lower()
    return {"log_health": f"{level}: {outcome.description}",
            **({"reasons": outcome.metadata["reasons"]} if "reasons" in outcome.metadata else {})}


#: The run id the state sensor's check results are recorded under.
SENSOR_RESULTS_RUN_ID = "log_state_sensor"


def latest_materializations(instance: dg.DagsterInstance, asset_key: dg.AssetKey,
                            partitions: Sequence[str]) -> dict[str, AssetCheckEvaluationTargetMaterializationData]:
    """Each of ``partitions``' latest materialization, as the target of a result recorded outside
    a run: the check's Partitions view counts a result only while it targets the partition's
    latest materialization (Dagster's ``AssetCheckPartitionInfo.is_current``), so an untargeted
    verdict of a partition cleaned once showed grey "Missing" there."""
    if not partitions:
        return {}
    ids = instance.event_log_storage.get_latest_storage_id_by_partition(
        asset_key, DagsterEventType.ASSET_MATERIALIZATION, set(partitions))
    if not ids:
        return {}
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, storage_ids=list(ids.values())), limit=len(ids)).records
    return {r.partition_key: AssetCheckEvaluationTargetMaterializationData(
        storage_id=r.storage_id, run_id=r.run_id, timestamp=r.timestamp) for r in records if r.partition_key}


def record_sensor_results(instance: dg.DagsterInstance, evaluations: Sequence[dg.AssetCheckEvaluation]) -> None:
    """Record check results evaluated by the state sensor, outside any run.

    Dagster 1.13 indexes check results in ``asset_check_executions``, one row per (asset, check,
    run id, partition) under a unique index, and takes a partition's latest result to be its
    row with the highest id. A run-less result (``report_runless_asset_event``, which a sensor's
    ``asset_events`` go through) has run id ``""``, so a partition's second one failed that
    index and the whole tick with it; a result reported under a run id updates that run's row
    in place (``_update_asset_check_evaluation``), which keeps its old id, so a newer sensor
    verdict ranked below an older result of a cleaning run. So the state sensor records under
    its own run id, ``SENSOR_RESULTS_RUN_ID`` (one, not one per tick: the SQLite event log keeps
    a database file per run id), and first drops its previous index row of each partition (of
    no partition, SQL ``IS NULL``, for ``topic_health``), so the new result gets the newest row. Only that index row goes: every result stays in the
    event log (records of run ``SENSOR_RESULTS_RUN_ID``) and every verdict in the observation
    recorded with it (``verdict_metadata``), which is the partition's history."""
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable  # not re-exported by dagster
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    storage = instance.event_log_storage
    if isinstance(storage, SqlEventLogStorage):
        table = AssetCheckExecutionsTable
        with storage.index_connection() as conn:
            for e in evaluations:
                conn.execute(table.delete().where(
                    (table.c.asset_key == e.asset_key.to_string()) & (table.c.check_name == e.check_name)
                    & (table.c.run_id == SENSOR_RESULTS_RUN_ID)
                    & (table.c.partition.is_(None) if e.partition is None else table.c.partition == e.partition)))
    for evaluation in evaluations:
        instance.report_dagster_event(
            DagsterEvent(DagsterEventType.ASSET_CHECK_EVALUATION.value, job_name=RUNLESS_JOB_NAME,
                         event_specific_data=evaluation, message=evaluation.description),
            run_id=SENSOR_RESULTS_RUN_ID)
