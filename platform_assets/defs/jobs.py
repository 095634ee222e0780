"""One asset job per topic, ``cleanup__<topic>``, and the run tags the platform sets.

Sensors and schedules target jobs, and Dagster refuses one target spanning assets with different
partition sets (every topic has its own), so each topic gets its own job; UI backfills and
clicks need no job. Every run of a job carries ``logplat/topic``; sensor runs add
``logplat/partition`` (or Dagster's partition range tags) and ``logplat/states``; whatever a run
lacks of the platform's tags (a backfill's, a click's) the asset's op adds at its start
(``logic/run_tags.py``).
``dagster_home/dagster.yaml`` limits runs per ``logplat/topic`` value to one, so the run queue
holds a second cleaning of a topic before it takes a run slot; the topic's concurrency pool (see
``assets.py``) is what bounds the runs that carry no such tag (UI clicks, asset backfills).
"""

from __future__ import annotations

import dagster as dg

from ..logic.catalog import Topic
from ..logic.run_tags import (  # noqa: F401 -- the tag names, spelled once in logic/run_tags.py
    FAILED_PARTITIONS_TAG,
    PARTITION_TAG,
    REASON_TAG,
    STATES_TAG,
    TOPIC_TAG,
    TRIGGER_TAG,
)
from .checks import log_asset_key


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


def run_topics(run: dg.DagsterRun) -> list[str]:
    """The topics a cleaning run covers: its ``logplat/topic`` tag, or, for a run that has none
    yet (a backfill's or a click's, tagged when it starts), its asset selection."""
    if TOPIC_TAG in run.tags:
        return [run.tags[TOPIC_TAG]]
    return [k.path[1] for k in (run.asset_selection or ()) if len(k.path) == 2 and k.path[0] == "logs"]
