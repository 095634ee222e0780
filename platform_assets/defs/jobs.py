"""One asset job per topic, ``cleanup__<topic>``, and the run tags the platform sets.

Sensors and schedules target jobs, and Dagster refuses one target spanning assets with different
partition sets (every topic has its own), so each topic gets its own job; UI backfills and
clicks need no job. Every run of a job carries ``logplat/topic``; sensor runs add
``logplat/partition`` (or Dagster's partition range tags) and ``logplat/states``.
``dagster_home/dagster.yaml`` limits runs per ``logplat/topic`` value to one, so the run queue
holds a second cleaning of a topic before it takes a run slot; the topic's concurrency pool (see
``assets.py``) is what bounds the runs that carry no such tag (UI clicks, asset backfills).
"""

from __future__ import annotations

import dagster as dg

from ..logic.catalog import Topic
from .checks import log_asset_key

TOPIC_TAG = "logplat/topic"
PARTITION_TAG = "logplat/partition"
TRIGGER_TAG = "logplat/trigger"  # compaction-sensor | retention-sensor | sweep
REASON_TAG = "logplat/reason"
STATES_TAG = "logplat/states"  # "<partition>:<state token>,...": what a sensor's or a sweep's run was requested for
#: "<partition>,...": the partitions whose cleaning failed in a run, added when it fails
FAILED_PARTITIONS_TAG = "logplat/failed_partitions"


def cleanup_job_name(topic: Topic) -> str:
    return f"cleanup__{topic.safe_name}"


def build_cleanup_job(topic: Topic) -> dg.UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        cleanup_job_name(topic),
        # the checks are logged by the asset's op itself; as their own step they would audit again
        selection=dg.AssetSelection.assets(log_asset_key(topic.name)).without_checks(),
        tags={TOPIC_TAG: topic.name},
        description=f"Clean partitions of topic {topic.name} as its cleanup.policy says (sensor and sweep target).",
    )
