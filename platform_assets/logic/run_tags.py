"""The tags every cleaning run carries, whoever launched it: ``logplat/topic``,
``logplat/trigger`` (``compaction-sensor``, ``retention-sensor``, ``sweep``, ``backfill`` or
``manual``), ``logplat/reason`` and ``logplat/states``.

Sensors and sweeps set them in their run requests. A backfill or a click in the UI launches
runs with Dagster's tags only (``dagster/backfill`` names the backfill), so the asset's op adds
what is missing when the run starts (``DagsterInstance.add_run_tags``): this decides what.
``logplat/states`` (each partition's state hash as the run found it) is what a failure of the
run is keyed on (``cleaning_failures``), so a failed backfill holds its partitions back like a
failed sensor run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

TOPIC_TAG = "logplat/topic"
PARTITION_TAG = "logplat/partition"
TRIGGER_TAG = "logplat/trigger"  # compaction-sensor | retention-sensor | sweep | backfill | manual
REASON_TAG = "logplat/reason"
STATES_TAG = "logplat/states"  # "<partition>:<state token>,...": the partitions' states the run was asked for
#: "<partition>:<error class>,...": the partitions whose cleaning failed in a run, added when it fails
FAILED_PARTITIONS_TAG = "logplat/failed_partitions"
BACKFILL_TAG = "dagster/backfill"  # Dagster's own (dagster._core.storage.tags)
SCHEDULE_NAME_TAG = "dagster/schedule_name"
SENSOR_NAME_TAG = "dagster/sensor_name"
MAX_REASON = 200


def start_tags(tags: Mapping[str, str], topic: str, partitions: Sequence[int],
               states: Mapping[int, str]) -> dict[str, str]:
    """The platform tags a run lacks at its start, given its tags and what it found."""
    span = (f"partition {partitions[0]}" if len(partitions) == 1
            else f"partitions {partitions[0]}..{partitions[-1]}")
    if BACKFILL_TAG in tags:
        trigger, reason = "backfill", f"backfill {tags[BACKFILL_TAG]} of {topic} {span}"
    elif SCHEDULE_NAME_TAG in tags:
        trigger, reason = "sweep", f"swept by {tags[SCHEDULE_NAME_TAG]}: {topic} {span}"
    elif SENSOR_NAME_TAG in tags:
        trigger, reason = tags[SENSOR_NAME_TAG].replace("_", "-"), f"{tags[SENSOR_NAME_TAG]}: {topic} {span}"
    else:
        trigger, reason = "manual", f"materialized by hand (UI or API): {topic} {span}"
    wanted = {TOPIC_TAG: topic, TRIGGER_TAG: trigger, REASON_TAG: reason[:MAX_REASON],
              STATES_TAG: ",".join(f"{p}:{states[p]}" for p in partitions if p in states)}
    return {k: v for k, v in wanted.items() if k not in tags and v}
