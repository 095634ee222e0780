"""One asset per topic, key ``["logs", <topic>]``, partitioned by Kafka partition.

Why per topic and partitioned (not one asset per topic-partition): a backfill of a whole topic is
one run and one Spark job (``BackfillPolicy.single_run()``), new partitions appear without a
reload, and the UI keeps one page per topic with every partition's status and metadata
(measured trade-offs in ``reference/dagster-notes.md``).

The checks are a separate ``multi_asset_check`` per topic (``build_log_checks``), not outputs
of the asset's op: a cleaning run logs each partition's results as events, tied to the
materialization it checked, so a run that compacted nothing records nothing and leaves earlier
results as the latest (an output it did not yield would be recorded "skipped"), and a range run
records one result per partition. Run on their own from the UI, the checks audit the logs as
they are. Each topic's runs use the concurrency pool ``logplat/topic/<topic>``, which
``dagster_home/dagster.yaml`` limits to one: two cleanings never race on a log, whoever launched
them (a sensor, a schedule, a backfill or a click).

(No ``from __future__ import annotations`` here: Dagster reads the asset function's parameter
annotations as types to find its config class and resources.)
"""


from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import dagster as dg

from ..logic.catalog import Topic
from ..logic.log_state import PartitionState, TopicPartition
from ..logic.metadata import glossary_markdown
from ..logic.report import MAX_ROWS, REPORT_GLOSSARY, cleaning_report
from .checks import check_specs, log_asset_key
from .cleanup import CLEAN, CLEANUP_CONFIG_SCHEMA, TIER, CleanupConfig, audit_partitions, clean_partitions
from .partitions import topic_partitions_def
from .resources import LogSparkResource, LogStoreResource
from .tiering import tier_partitions


def op_name(topic: Topic) -> str:
    return f"logs__{topic.safe_name}"


def pool_name(topic: Topic) -> str:
    return f"logplat/topic/{topic.name}"


#: The report across topics (``logic/report.py``), recorded by ``log_state_sensor``.
REPORT_KEY = dg.AssetKey(["platform", "cleaning_report"])


def cleanup_run_config(topic: Topic, *, force_compaction: bool, operation: str = CLEAN) -> dg.RunConfig:
    """Run config for one of the topic's runs (sensors and sweeps pass ``force_compaction=False``
    unless an erasure deadline alone asks for a partition: ``forced_by_deadline``; the tiering
    sensor passes ``operation="tier"``)."""
    config: dict[str, object] = {"force_compaction": force_compaction}
    if operation != CLEAN:
        config["operation"] = operation
    return dg.RunConfig(ops={op_name(topic): {"config": config}})


def _description(topic: Topic) -> str:
    jobs = {
        "compact": "key-based compaction (Spark)",
        "delete": "time and size retention (Spark)",
        "compact_delete": "key-based compaction, then time and size retention (Spark)",
    }
    return (f"Kafka topic `{topic.name}` (cleanup.policy={','.join(topic.config.cleanup_policy)}): each partition is "
            f"one Kafka log. Materializing a partition runs {jobs.get(topic.policy, 'nothing')} on it and records the "
            "log's checkpoints, offsets, size and dirty ratio before and after (`*_before`); the state sensor "
            "observes each partition when it changes. Which partitions need cleaning, across topics: "
            f"`{'/'.join(REPORT_KEY.path)}`.\n\n{glossary_markdown()}")


def build_log_asset(topic: Topic, owners: Sequence[str] = ()) -> dg.AssetsDefinition:
    spec = dg.AssetSpec(
        log_asset_key(topic.name),
        description=_description(topic),
        group_name=topic.policy,
        partitions_def=topic_partitions_def(topic.name),
        kinds={"spark", "kafka"},
        tags={"logplat/policy": topic.policy},
        metadata={"topic": topic.name, **topic.shown_configs()},
        owners=list(owners),
    )

    @dg.multi_asset(
        name=op_name(topic),
        specs=[spec],
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=pool_name(topic),
        config_schema=CLEANUP_CONFIG_SCHEMA,
    )
    def _log(context: dg.AssetExecutionContext, pyspark: LogSparkResource,
             log_store: LogStoreResource) -> Iterator[Any]:
        config = CleanupConfig(**context.op_execution_context.op_config)
        if config.operation == TIER:
            yield from tier_partitions(context, topic, config.now_ms, log_store)
        else:
            yield from clean_partitions(context, topic, config, pyspark, log_store)

    return _log


def build_report_asset(owners: Sequence[str] = ()) -> dg.AssetSpec:
    """An external asset (no run materializes it): the state sensor records its materialization
    at each tick that records a partition's change, so its latest one is the platform as it is."""
    return dg.AssetSpec(
        REPORT_KEY,
        description=f"What needs cleaning across every topic, and why: each partition whose log_health is not "
                    "passed, worst first (unreadable, ERROR, WARN; then the earliest erasure deadline, the "
                    f"dirtiest, the most bytes deletable), at most {MAX_ROWS} rows, recorded by log_state_sensor when "
                    f"any partition's state or verdict changes.\n\n{glossary_markdown(REPORT_GLOSSARY)}",
        group_name="platform",
        kinds={"kafka"},
        owners=list(owners),
    )


def report_materialization(states: Sequence[PartitionState], unreadable: Mapping[TopicPartition, str],
                           failed: Mapping[TopicPartition, str]) -> dg.AssetMaterialization:
    """The report over every partition's state now (the state sensor's tick), as its event."""
    return dg.AssetMaterialization(asset_key=REPORT_KEY,
                                   metadata=cleaning_report(states, unreadable, failed).metadata())


def build_log_checks(topic: Topic) -> dg.AssetChecksDefinition:
    """The topic's checks (``checks.py``): recorded by its cleaning runs, and executable on
    their own as an audit of the logs as they are."""

    @dg.multi_asset_check(name=f"checks__{topic.safe_name}", specs=check_specs(topic), can_subset=True,
                          pool=pool_name(topic))
    def _checks(context: dg.AssetCheckExecutionContext, pyspark: LogSparkResource,
                log_store: LogStoreResource) -> Iterator[dg.AssetCheckResult]:
        yield from audit_partitions(context, topic, pyspark, log_store)

    return _checks
