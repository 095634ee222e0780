"""Builders shared by the platform tests: small workloads on real files, definitions over them,
sensor ticks evaluated the way the daemon evaluates them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from platform_assets.definitions import build_definitions
from platform_assets.defs.checks import SENSOR_RESULTS_RUN_ID
from platform_assets.defs.resources import LogSparkResource, build_resources
from platform_assets.logic.settings import PlatformSettings
from platform_assets.tools.workload import TopicWorkload
from storage_engine.record import CompressionType

HOUR_MS = 3_600_000

#: A compacted topic: partition 0 spans many segments (due), partition 1 only its active segment
#: (nothing cleanable), partition 2 many segments (due).
COMPACTED = TopicWorkload(
    "orders", 3, {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "0"},
    records=400, keys=40, tombstone_ratio=0.1, value_bytes=40, partition_records={1: 5},
    compression=CompressionType.NONE, batch_records=10,
)
#: compact,delete with old records (some segments past retention.ms).
COMPACT_DELETE = TopicWorkload(
    "profiles.v1", 2, {"cleanup.policy": "compact,delete", "segment.bytes": "4096", "retention.ms": str(2 * HOUR_MS)},
    records=300, keys=30, tombstone_ratio=0.1, value_bytes=40, age_ms=4 * HOUR_MS,
    compression=CompressionType.LZ4, batch_records=10,
)
#: delete: partition 0 with expired segments, partition 1 written just now (nothing expired).
DELETE = TopicWorkload(
    "clicks", 2, {"cleanup.policy": "delete", "segment.bytes": "4096", "retention.ms": str(HOUR_MS)},
    records=300, keys=1000, value_bytes=40, age_ms=3 * HOUR_MS, batch_records=10,
    compression=CompressionType.NONE,
)


def settings_for(root: Path, **overrides: object) -> PlatformSettings:
    values: dict = {"log_dirs": (str(root),), "automation": "stopped", **overrides}
    return PlatformSettings(**values)


def definitions_for(root: Path, **overrides: object) -> tuple[dg.Definitions, PlatformSettings]:
    settings = settings_for(root, **overrides)
    return build_definitions(settings), settings


def resources_with_test_session(settings: PlatformSettings) -> dict:
    """The definitions' resources, with a pyspark resource that hands back the test session."""
    resources = build_resources(settings)
    resources["pyspark"] = LogSparkResource(spark_config={})
    return resources


def tick(defs: dg.Definitions, settings: PlatformSettings, instance: dg.DagsterInstance, name: str,
         cursor: str | None = None):
    """One evaluation of a sensor as the daemon runs it (partition keys resolved against the
    instance, dynamic partition requests applied first), without applying its results."""
    sensor = defs.get_repository_def().get_sensor_def(name)
    # as a context manager: the instance it opens from the ref is closed again, and does not stay
    # Dagster's "current" one (a later load context would reach for it after it is gone)
    with dg.build_sensor_context(instance_ref=instance.get_ref(), definitions=defs, cursor=cursor,
                                 resources=build_resources(settings)) as context:
        return sensor.evaluate_tick(context)


def apply_partition_requests(instance: dg.DagsterInstance, requests: Sequence) -> None:
    """Carry out a tick's dynamic partition requests in order, as the sensor daemon does."""
    for request in requests or ():
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


@dataclass(frozen=True)
class StateTick:
    """A ``log_state_sensor`` tick (its partition requests applied, as the daemon would) and the
    check results it recorded itself (``checks.record_sensor_results``), by (topic, partition)."""

    data: object
    health: dict[tuple[str, str], dg.AssetCheckEvaluation]

    def __getattr__(self, name: str):
        return getattr(self.data, name)


def sensor_results(instance: dg.DagsterInstance) -> list[dg.AssetCheckEvaluation]:
    """Every check result the state sensor recorded, oldest first."""
    return [e.dagster_event.event_specific_data for e in instance.all_logs(SENSOR_RESULTS_RUN_ID)
            if e.dagster_event is not None and e.dagster_event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION]


def state_tick(defs: dg.Definitions, settings: PlatformSettings, instance: dg.DagsterInstance,
               cursor: str | None = None) -> StateTick:
    before = len(sensor_results(instance))
    data = tick(defs, settings, instance, "log_state_sensor", cursor)
    apply_partition_requests(instance, data.dynamic_partitions_requests)
    return StateTick(data, {(e.asset_key.path[1], e.partition or ""): e for e in sensor_results(instance)[before:]
                            if e.check_name == "log_health"})
