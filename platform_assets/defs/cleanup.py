"""What one materialization of a topic asset does: clean the run's partitions with Spark, record
each partition's before/after as metadata, and check every compaction.

A run covers one partition (a sensor's request) or a contiguous range (a backfill or a sweep:
``BackfillPolicy.single_run()`` makes it one run and one Spark job). The topic's
``cleanup.policy`` picks the job: ``compact`` and ``compact,delete`` run the distributed
compaction (which applies retention to ``compact,delete`` logs as Kafka's cleaner thread does;
``compact`` logs with segments below their log start offset also get the retention job, which
for them is that single rule), ``delete`` runs the retention job.

Every partition of the run is materialized, cleaned or not, so its metadata always shows the log
as it is after the run; the ``status`` entry says what happened (``compacted``, ``skipped``,
``deleted``, ``nothing``, ``changed``: another writer changed the log under the job and nothing
was committed, the next request will see the new state). A partition the jobs report ``failed``
is not materialized: the run fails with the engine's reason first (``errors.cleaning_failure``),
so Dagster shows that partition failed (and a backfill counts it failed) while the others of the
run keep their materializations. A run tags itself with what its launcher could not set
(``logic/run_tags.py``) as soon as it has observed its partitions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._config import ConfigScalar, ConfigScalarKind  # a scalar type with a range: not re-exported
from dagster._config.errors import PostProcessingError
from dagster._core.definitions.data_version import DATA_VERSION_TAG  # not re-exported by dagster

from spark_jobs import reads
from spark_jobs.compaction import compact_partitions
from spark_jobs.retention import retention_partitions
from storage_engine.config.topic import LogConfig
from storage_engine.config.values import MAX_TIMESTAMP_MS, between
from storage_engine.errors import ConfigError, LogError, NeedsRecoveryError
from storage_engine.outcomes import COMPACTED, FAILED
from storage_engine.remote.retention import RemoteRetentionResult

from ..logic.catalog import Topic
from ..logic.check_outcomes import HEALTH_CHECK, LATEST_VALUES, TOPIC_HEALTH, CheckOutcome, evaluate_checks
from ..logic.cleaning_failures import encode_failed, error_class
from ..logic.health import health_outcome, unreadable_outcome
from ..logic.log_state import PartitionState, observe
from ..logic.metadata import cleanup_metadata, records_counted
from ..logic.partition_cleanup import PartitionCleanup, run_data_version
from ..logic.partition_keys import partition_key, partition_number
from ..logic.record_core import executors_core, record_core_metadata
from ..logic.run_tags import start_tags
from .checks import evaluations, latest_materializations, log_asset_key, run_materializations
from .errors import cleaning_failure, run_refusals_first
from .jobs import FAILED_PARTITIONS_TAG
from .partitions import partitions_def_name
from .resources import LogSparkResource, LogStoreResource
from .topic_health import topic_health_evaluation, topic_healths

# Where a run's time went, once per run as run tags (a materialization's metadata would repeat
# them on every partition of a range): the fixed cost of getting a session, the cleaning jobs,
# and the checks' reads of the logs around them. ``bench/bench_dagster_run.py`` reads them.
SPARK_SESSION_SECONDS_TAG = "logplat/spark_session_seconds"  # the run worker's session (its start on first use)
SPARK_JOB_SECONDS_TAG = "logplat/spark_job_seconds"  # the compaction and retention jobs, wall time
CHECK_READ_SECONDS_TAG = "logplat/check_read_seconds"  # the checks' reads, before and after the jobs


_CLOCK_RANGE = between(0, MAX_TIMESTAMP_MS)
CLEAN, TIER = "clean", "tier"  # a run's ``operation``


class ClockMs(ConfigScalar):
    """A run config clock: an int of ms since the epoch, 0 to ``MAX_TIMESTAMP_MS`` (the engine's
    bound, checked by its ``between`` rule). Dagster's config types carry no range, so the bound is
    this type's post-processing, which Dagster's run-config validation applies: a launch (or
    ``validate_run_config``) with a clock out of range is refused, naming the field and the
    range, before a run exists."""

    def __init__(self) -> None:
        super().__init__(key="ClockMs", given_name="ClockMs", scalar_kind=ConfigScalarKind.INT,
                         description=f"ms since the epoch, 0 to {MAX_TIMESTAMP_MS}")

    def post_process(self, value: int) -> int:
        try:
            _CLOCK_RANGE("now_ms", value, value)
        except ConfigError as exc:
            raise PostProcessingError(str(exc)) from None
        return value


#: Run configuration of a topic asset (a backfill or a click in the UI uses the defaults).
CLEANUP_CONFIG_SCHEMA = {
    "force_compaction": dg.Field(
        bool, default_value=True,
        description="Compact every partition of the run whatever its dirty ratio (a materialization asked for by "
        "hand means 'clean now'). Sensors and sweeps set false (only partitions Kafka's cleaner would pick), "
        "except for a partition its erasure deadline alone asks for.",
    ),
    "operation": dg.Field(
        dg.Enum("Operation", [dg.EnumValue(CLEAN, description="clean as the topic's cleanup.policy says"),
                              dg.EnumValue(TIER, description="copy rolled segments to the remote tier and release "
                                                             "local copies past local.retention.* (tiered topics)")]),
        default_value=CLEAN,
        description="What the run does: `clean` (compaction and retention) or `tier` (the tiering sensor's runs).",
    ),
    "now_ms": dg.Field(
        dg.Noneable(ClockMs()), default_value=None,
        description="The clock retention, compaction lags and tombstone horizons judge by, in ms since the epoch, "
        f"0 to {MAX_TIMESTAMP_MS} (default: the wall clock when the run starts).",
    ),
}


@dataclass(frozen=True)
class CleanupConfig:
    """A run's ``CLEANUP_CONFIG_SCHEMA`` values, as validated by Dagster."""

    force_compaction: bool = True
    operation: str = CLEAN
    now_ms: int | None = None


def observe_partitions(log_store: LogStoreResource, topic: str, partitions: Sequence[int], now_ms: int,
             unreadable: dict[int, str] | None = None) -> dict[int, tuple[PartitionState, int]]:
    """The cheap state and the log end offset of each partition (read-only); only these are
    read, so another partition of the topic that cannot be read fails no run of these. Given
    ``unreadable`` (an audit), a partition that cannot be read goes there with why and the
    others are observed; else it fails the run."""
    out: dict[int, tuple[PartitionState, int]] = {}
    with log_store.manager() as manager:
        for group in [list(partitions)] if unreadable is None else [[p] for p in partitions]:
            try:
                out.update(observe(manager, topic, group, now_ms=now_ms))
            except LogError as exc:
                if unreadable is None:
                    raise
                unreadable[group[0]] = str(exc)
    missing = sorted(set(partitions) - set(out) - set(unreadable or ()))
    if missing:
        raise dg.Failure(f"partitions {missing} of topic {topic} are not in {', '.join(log_store.log_dirs)}")
    return out


def recover_then_observe(context: dg.AssetExecutionContext, log_store: LogStoreResource, topic: str,
                          partitions: Sequence[int], now_ms: int) -> dict[int, tuple[PartitionState, int]]:
    """``observe_partitions`` before a cleaning. A partition that a writable open would repair first (an
    interrupted swap: a cleaner killed part way) cannot be read as it is; the cleaning opens it
    for writing anyway, so it recovers the run's partitions first, as a broker does at start.
    Without this the retry of a run killed in its swap failed the same way, as did every later
    run of the partition, until some other writer happened to open the log dir."""
    try:
        return observe_partitions(log_store, topic, partitions, now_ms)
    except NeedsRecoveryError as exc:
        context.log.info(f"{exc}; recovering the run's partitions first")
    with log_store.manager(read_only=False) as manager:
        for p in partitions:
            manager.get_log(topic, p)
    return observe_partitions(log_store, topic, partitions, now_ms)


def retention_job_needed(config: LogConfig, deletable_segments: int) -> bool:
    """Whether a partition's run calls the retention job: always for ``delete`` alone; for
    ``compact,delete`` never (the compaction job applies retention); for ``compact`` alone and
    for the empty policy (KIP-1161, kept forever) only for segments below a ``delete-records``
    log start offset, the one retention they have."""
    if config.delete:
        return not config.compact
    return deletable_segments > 0


def _run_jobs(spark, topic: Topic, log_store: LogStoreResource, cleanups: dict[int, PartitionCleanup],
              config: CleanupConfig, now_ms: int, log) -> float:
    """The Spark job(s) the topic's cleanup.policy calls for, outcomes stored per partition;
    returns the jobs' wall seconds."""
    dirs, props = log_store.log_dirs, log_store.broker_properties
    tps = [(topic.name, p) for p in sorted(cleanups)]
    seconds = 0.0
    if topic.compact:
        result = compact_partitions(spark, dirs, tps, now_ms=now_ms, force=config.force_compaction, broker_props=props)
        log.info(f"compaction job over {len(tps)} partition(s) of {topic.name} took {result.duration_s:.2f} s")
        seconds += result.duration_s
        for outcome in result.outcomes:
            cleanups[outcome.partition].compaction = outcome
    needs_retention = [tp for tp in tps
                       if retention_job_needed(topic.config, cleanups[tp[1]].before.deletable_segments)]
    if needs_retention:
        retention = retention_partitions(spark, dirs, needs_retention, now_ms=now_ms, broker_props=props)
        log.info(f"retention job over {len(needs_retention)} partition(s) of {topic.name} "
                 f"took {retention.duration_s:.2f} s")
        seconds += retention.duration_s
        for outcome in retention.outcomes:  # a tiered partition's: its remote tier's, then its local copies'
            if isinstance(outcome, RemoteRetentionResult):
                cleanups[outcome.partition].remote_retention = outcome
            else:
                cleanups[outcome.partition].retention = outcome
    return seconds


def _check_compactions(spark, topic: Topic, log_store: LogStoreResource, cleanups: dict[int, PartitionCleanup],
                       before: dict[int, reads.KeyFacts]) -> list[CheckOutcome]:
    """Compare each compacted partition with what was read before the run."""
    compacted = sorted(p for p, c in cleanups.items() if c.compaction is not None and c.compaction.status == COMPACTED)
    if not compacted:
        return []
    after = {p: cleanups[p].after for p in compacted}
    digests = reads.summarize({p: before[p] for p in compacted},
                                    from_offsets={p: s.log_start_offset for p, s in after.items()})
    return _state_checks(spark, topic, log_store, after, {p: cleanups[p].leo_before for p in compacted}, digests)[0]


def _state_checks(spark, topic: Topic, log_store: LogStoreResource, states: dict[int, PartitionState],
                  ending: dict[int, int], before: dict[int, reads.PartitionFacts] | None
                  ) -> tuple[list[CheckOutcome], dict[int, str]]:
    """The checks of each partition in ``states`` over ``[log start, ending[p])``; the latest-value
    comparison only when there is a ``before``. With them, where each partition's read stopped
    at a damaged batch, if it did."""
    cleaned_end = {p: s.cleaner_checkpoint for p, s in states.items() if s.cleaner_checkpoint is not None}
    read = reads.key_facts(spark, log_store.log_dirs, topic.name, ending, broker_props=log_store.broker_properties,
                                 cleaned_end=cleaned_end, verify=True)
    after = reads.summarize(read)
    outcomes: list[CheckOutcome] = []
    errors: dict[int, str] = {}
    for p, state in sorted(states.items()):
        facts = after[p]
        digests = None if before is None else (before[p].digest, facts.digest)
        error = next((f.error for f in (before[p] if before else None, facts) if f is not None and f.error), None)
        outcomes.extend(evaluate_checks(p, state, facts.duplicates, read[p].verification, digests, error))
        if error is not None:
            errors[p] = error
    return outcomes, errors


def run_partitions(context: dg.AssetExecutionContext | dg.OpExecutionContext, topic: Topic,
                    log_store: LogStoreResource, *, whole_topic: bool) -> list[int]:
    """The run's partitions, checked before anything is read or cleaned. A run without any
    gets every partition of the topic with ``whole_topic`` (Dagster runs checks selected without
    their asset unpartitioned), and is refused without: a cleaning run without a partition
    (launched with no partition tags) would clean every partition and then have none to record
    its materializations under."""
    if context.has_partition_key or context.has_partition_key_range:
        try:
            partitions = sorted(partition_number(k) for k in context.partition_keys)
        except ValueError as exc:
            raise dg.Failure(f"{exc}: the run names no partition of topic {topic.name}", allow_retries=False) from None
        if not partitions:
            keys = context.partition_key_range
            raise dg.Failure(f"the partition range {keys.start}..{keys.end} of topic {topic.name} holds no partition "
                             "(its start is after its end)", allow_retries=False)
        return partitions
    if not whole_topic:
        raise dg.Failure(f"a cleaning run of topic {topic.name} needs a partition or a partition range: launch it "
                         "from the asset's partitions, as a backfill, or let the topic's sensors launch it",
                         allow_retries=False)
    with log_store.manager() as manager:
        return manager.partitions(topic.name)


@run_refusals_first
def clean_partitions(context: dg.AssetExecutionContext, topic: Topic, config: CleanupConfig,
                     pyspark: LogSparkResource, log_store: LogStoreResource) -> Iterator[Any]:
    """The body of the topic asset (see the module docstring)."""
    partitions = run_partitions(context, topic, log_store, whole_topic=False)
    now_ms = config.now_ms if config.now_ms is not None else int(time.time() * 1000)
    observed = recover_then_observe(context, log_store, topic.name, partitions, now_ms)
    missing_tags = start_tags(context.run.tags, topic.name, partitions,
                              {p: state.state_hash for p, (state, _) in observed.items()})
    if missing_tags:
        context.instance.add_run_tags(context.run.run_id, missing_tags)
    try:
        yield from _clean(context, topic, config, pyspark, log_store, observed, now_ms)
    except LogError as exc:  # the whole run refused (run_refusals_first says why): each partition failed so
        tag_failed(context, {p: type(exc).__name__ for p in partitions})
        raise


def tag_failed(context: dg.AssetExecutionContext, errors: dict[int, str]) -> None:
    """The ``logplat/failed_partitions`` tag: which partitions failed, and on which error class,
    so the sensors hold a data error back and retry a transient one (``cleaning_failures``)."""
    context.instance.add_run_tags(context.run.run_id, {FAILED_PARTITIONS_TAG: encode_failed(
        {partition_key(p): error for p, error in errors.items()})})


def _clean(context: dg.AssetExecutionContext, topic: Topic, config: CleanupConfig, pyspark: LogSparkResource,
           log_store: LogStoreResource, observed: dict[int, tuple[PartitionState, int]], now_ms: int) -> Iterator[Any]:
    """Clean the observed partitions, record them and their checks (see the module docstring)."""
    asset_key = log_asset_key(topic.name)
    partitions = sorted(observed)
    cleanups = {p: PartitionCleanup(p, state, leo) for p, (state, leo) in observed.items()}
    started = time.monotonic()
    spark = pyspark.spark_session
    session_s = time.monotonic() - started
    # every partition the job may compact, not only those due now: an unforced job judges at its own
    # time, and one that became due since the observation would be compacted with nothing to compare
    checked = partitions if topic.compact else []
    started = time.monotonic()
    before = reads.key_facts(spark, log_store.log_dirs, topic.name, {p: cleanups[p].leo_before for p in checked},
                                   broker_props=log_store.broker_properties)
    read_s = time.monotonic() - started
    if checked:
        context.log.info(f"latest values of {len(checked)} partition(s) read in {read_s:.2f} s")
    job_seconds = _run_jobs(spark, topic, log_store, cleanups, config, now_ms, context.log)
    context.instance.add_run_tags(context.run.run_id, {SPARK_SESSION_SECONDS_TAG: f"{session_s:.3f}",
                                                       SPARK_JOB_SECONDS_TAG: f"{job_seconds:.3f}"})
    for p, (state, leo) in observe_partitions(log_store, topic.name, partitions, now_ms).items():
        cleanups[p].after, cleanups[p].leo_after = state, leo
    started = time.monotonic()
    check_outcomes = _check_compactions(spark, topic, log_store, cleanups, before)
    check_outcomes += [health_outcome(c.after, cleaning_failed=c.reason if c.status == FAILED else None)
                       for c in cleanups.values() if c.after is not None]
    checks_s = time.monotonic() - started
    read_s += checks_s
    if check_outcomes:
        context.log.info(f"{len(check_outcomes)} check(s) evaluated in {checks_s:.2f} s")
    context.instance.add_run_tags(context.run.run_id, {CHECK_READ_SECONDS_TAG: f"{read_s:.3f}"})
    run_metadata = {"now_ms": dg.MetadataValue.timestamp(now_ms / 1000),
                    **record_core_metadata(executors_core(spark))}  # the core the Spark workers ran
    data_version = run_data_version(list(cleanups.values()))
    failed = {c.partition: c.reason or "" for c in cleanups.values() if c.status == FAILED}
    counted = records_counted(check_outcomes)
    if not failed:
        for c in cleanups.values():
            context.add_asset_metadata(cleanup_metadata(c, counted.get(c.partition)), partition_key=c.key)
        yield dg.MaterializeResult(asset_key=asset_key, metadata=run_metadata,
                                   data_version=dg.DataVersion(data_version))
    else:
        # A partition whose cleaning failed is not materialized and the run fails, so Dagster
        # counts the partition failed (its planned materialization has none, in a failed run;
        # one materialized before turns failed too) and a backfill that holds it ends failed,
        # while the others of a range are materialized. Why it failed is the run failure's
        # description, first, and its log_health.
        for c in cleanups.values():
            if c.status != FAILED:
                context.log_event(dg.AssetMaterialization(
                    asset_key=asset_key, partition=c.key,
                    metadata={**cleanup_metadata(c, counted.get(c.partition)), **run_metadata},
                    tags={DATA_VERSION_TAG: data_version}))
    _log_checks(context, asset_key, check_outcomes, tie_to_materializations=True)
    if failed:
        tag_failed(context, {p: error_class(why) for p, why in failed.items()})
        raise cleaning_failure(topic.name, failed)


def _log_checks(context: dg.AssetExecutionContext | dg.OpExecutionContext, asset_key: dg.AssetKey,
                outcomes: list[CheckOutcome], *, tie_to_materializations: bool) -> None:
    """Each outcome logged as its partition's own check evaluation. The checks are not outputs
    of the asset's op (``defs/checks.py``), so a run that had nothing to check records nothing
    and earlier results stay the latest; and a run over a range records one result per
    partition, tied to the materialization this run recorded for that partition. An audit's
    results are tied to each partition's latest materialization, as the state sensor's are
    (``checks.latest_materializations``): untied, the check's Partitions view and
    ``topic_health`` counted them "Missing" on every partition cleaned before."""
    keys = sorted({partition_key(o.partition) for o in outcomes})
    targets = (run_materializations(context.instance, asset_key, context.run.run_id, keys) if tie_to_materializations
               else latest_materializations(context.instance, asset_key, keys))
    for evaluation in evaluations(asset_key, outcomes, targets):
        context.log_event(evaluation)


@run_refusals_first
def audit_partitions(context: dg.AssetCheckExecutionContext, topic: Topic, pyspark: LogSparkResource,
                     log_store: LogStoreResource) -> Iterator[dg.AssetCheckResult]:
    """The checks' own step. Run alone (the UI's "Execute"), it audits the logs as they are,
    every partition of the topic (Dagster runs checks selected without their asset
    unpartitioned); the latest-value check needs a compaction to compare across, so an audit
    does not evaluate it. Run with the asset (a UI click or a backfill), the cleaning op has
    already logged the results of what it compacted, tied to their materializations; Dagster
    planned every check for every partition of the run, so the partitions the run did not
    compact are audited here and tied to this run's materializations too, instead of showing
    "Skipped" over their earlier results. Each partition's result is logged as its own
    evaluation, and the run log says how many passed per check. No result is yielded for the
    run as a whole: in a partition run it became that partition's latest result, hiding the
    real one, and in an unpartitioned run (the UI's "Execute") Dagster failed the step looking
    for the partitioned asset's materialization to tie it to. ``topic_health``, selected, is
    the rollup of every partition's current ``log_health`` once this run's are logged."""
    op_context = context.op_execution_context
    asset_key = log_asset_key(topic.name)
    selected = {k.name for k in context.selected_asset_check_keys}
    rollup = TOPIC_HEALTH in selected  # not per partition: the rollup of log_health, once it is logged
    selected.discard(TOPIC_HEALTH)
    partitions = run_partitions(op_context, topic, log_store, whole_topic=True)
    # the asset ran before this step in the same run when the run has materializations of it
    with_asset = bool(run_materializations(op_context.instance, asset_key, op_context.run.run_id,
                                           [partition_key(p) for p in partitions]))
    results = _logged_results(op_context, asset_key, selected) if with_asset else {}
    missing = {p for p in partitions for name in selected if partition_key(p) not in results.get(name, {})}
    outcomes = _audit(pyspark, topic, log_store, sorted(missing), selected, compacted_elsewhere=with_asset)
    outcomes = [o for o in outcomes if partition_key(o.partition) not in results.get(o.name, {})]
    _log_checks(op_context, asset_key, outcomes, tie_to_materializations=with_asset)
    for o in outcomes:
        results.setdefault(o.name, {})[partition_key(o.partition)] = (o.passed, o.severity)
    for name in sorted(selected):
        if name == LATEST_VALUES and not results.get(name):
            op_context.log.info(f"{name}: not evaluated by an audit: it compares a compaction's before and after")
        else:
            passed, text = _summary(results.get(name, {}))
            (op_context.log.info if passed else op_context.log.warning)(f"{name}: {text}")
    if rollup:
        keys = op_context.instance.get_dynamic_partitions(partitions_def_name(topic.name))
        op_context.log_event(topic_health_evaluation(
            topic.name, topic_healths(op_context.instance, {topic.name: keys})[topic.name]))
    yield from ()  # every result was logged above, each tied to its partition


def _audit(pyspark: LogSparkResource, topic: Topic, log_store: LogStoreResource, partitions: list[int],
           selected: set[str], *, compacted_elsewhere: bool) -> list[CheckOutcome]:
    """The selected checks of ``partitions`` on their logs as they are. ``compacted_elsewhere``:
    this run's cleaning op checked what it compacted, so the rest were not compacted by it and
    their latest values are, trivially, the ones they had."""
    if not partitions:
        return []
    unreadable: dict[int, str] = {}  # each is its own failed log_health; the others are audited
    observed = observe_partitions(log_store, topic.name, partitions, int(time.time() * 1000), unreadable)
    outcomes: list[CheckOutcome] = [unreadable_outcome(p, why) for p, why in sorted(unreadable.items())]
    read_errors: dict[int, str] = {}  # a damaged batch the records' checks met: log_health says so too
    if selected - {HEALTH_CHECK, LATEST_VALUES} and observed:
        checked, read_errors = _state_checks(pyspark.spark_session, topic, log_store,
                                             {p: s for p, (s, _) in observed.items()},
                                             {p: leo for p, (_, leo) in observed.items()}, None)
        outcomes += checked
    if HEALTH_CHECK in selected:
        outcomes += [health_outcome(s, read_error=read_errors.get(p)) for p, (s, _) in observed.items()]
    if compacted_elsewhere and LATEST_VALUES in selected:
        outcomes += [CheckOutcome(LATEST_VALUES, p, True, "not compacted by this run: the cleaner changed none of "
                                  "its values") for p in partitions]
    return [o for o in outcomes if o.name in selected]


def _summary(results: dict[str, tuple[bool, dg.AssetCheckSeverity]]) -> tuple[bool, str]:
    """A whole run of a check in one line for the run log: passed when every partition passed."""
    failing = sorted((p for p, (passed, _) in results.items() if not passed), key=partition_number)
    text = f"{len(results) - len(failing)} of {len(results)} partition(s) passed"
    return not failing, text + (f"; failing: {', '.join(failing)}" if failing else "")


def _logged_results(context: dg.OpExecutionContext, asset_key: dg.AssetKey, selected: set[str]
                    ) -> dict[str, dict[str, tuple[bool, dg.AssetCheckSeverity]]]:
    """What this run's cleaning op logged for each selected check: partition -> (passed, severity).

    Read from this run's own check evaluations, not from each check's execution history: that
    history grows with every run of the topic (5,000 results of a check took 0.3-0.6 s to read
    and decode, per check and per run), while a run's events are as many as it logged."""
    out: dict[str, dict[str, tuple[bool, dg.AssetCheckSeverity]]] = {name: {} for name in sorted(selected)}
    records = context.instance.get_records_for_run(context.run.run_id,
                                                   of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    for r in records:  # oldest first: a later result of a partition replaces an earlier one
        evaluation = r.event_log_entry.dagster_event.event_specific_data if r.event_log_entry.dagster_event else None
        if (isinstance(evaluation, dg.AssetCheckEvaluation) and evaluation.asset_key == asset_key
                and evaluation.check_name in out and evaluation.partition is not None):
            out[evaluation.check_name][evaluation.partition] = (evaluation.passed, evaluation.severity)
    return out
