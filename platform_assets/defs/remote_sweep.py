"""The sweep of the remote tier's objects: ``sweep_remote_objects``, a job, and
``remote_sweep_schedule``, which launches it every ``log.retention.check.interval.ms``.

An object a version released, or that no version names (an orphan: the upload of a writer that
died or lost a commit race), is deleted only by the sweep (``storage_engine.remote.sweeper``:
after ``file.delete.delay.ms``, once no retained or pinned version names it, orphans past the
floor), as ``logctl sweep`` runs it: the run calls the engine's loop over every tiered
partition (``remote.tier_runs.sweep_tiered``), on one store. It is a run, not a sensor tick: it
lists and reads every tiered partition's versions and objects, work a tick of the daemon (which
judges thousands of partitions from cheap stats) must not do; and a run has a log and a record.

What it deleted is recorded three ways: a line per partition in the run log (``SweepResult.
summary``, what ``logctl sweep`` prints); an ``AssetObservation`` of each partition that deleted
something (``metadata.sweep_metadata``: objects by the rule that let them go, what stayed, its
requests); and the run's totals as the step's output metadata (``sweep_run_metadata``). A
partition whose sweep failed deleted nothing more (the sweeper deletes less rather than more)
and fails the run, naming it, after the others are recorded.

While cleaning is paused (``pause.py``) the schedule requests no run, saying so, and a run
launched anyway deletes nothing: the switch is read again when it starts (``pause_cleaning``
cancels only queued cleaning runs of topics). A tick also skips while a sweep is queued or
running. Like the other schedules, its default status follows ``LOGPLAT_AUTOMATION``; it exists
where tiering can happen (``tiering.remote_tier_in_use``), as ``tiering_sensor`` does.

(No ``from __future__ import annotations`` here: Dagster reads the op's ``context`` annotation.)
"""

import dagster as dg

from storage_engine.outcomes import FAILED
from storage_engine.remote.partition import ORPHAN_MIN_AGE_MS, wall_clock_ms
from storage_engine.remote.tier_runs import sweep_tiered

from ..logic.catalog import Topic
from ..logic.metadata import sweep_metadata, sweep_run_metadata
from ..logic.partition_keys import partition_key
from ..logic.settings import PlatformSettings
from .checks import log_asset_key
from .errors import run_refusals_first, tick_refusals_first
from .jobs import TRIGGER_TAG
from .pause import read_switch
from .resources import LogStoreResource
from .schedules import cron_for_interval_ms
from .sensors import IN_FLIGHT, default_status

SWEEP_JOB = "sweep_remote_objects"
SWEEP_SCHEDULE = "remote_sweep_schedule"

SWEEP_CONFIG_SCHEMA = {
    "dry_run": dg.Field(bool, default_value=False, description="Plan and record what would go; delete nothing."),
    "orphan_min_age_ms": dg.Field(
        dg.IntSource, default_value=ORPHAN_MIN_AGE_MS,
        description="Delete an object no version names only when older than this (the orphan floor, at least "
        f"{ORPHAN_MIN_AGE_MS}: a writer never commits uploads older than half of it)."),
}


def build_remote_sweep(topics: list[Topic], settings: PlatformSettings
                       ) -> tuple[dg.JobDefinition, dg.ScheduleDefinition]:
    """The sweep job and its schedule (see the module docstring)."""
    known = {t.name for t in topics}

    @dg.op(name="sweep_remote_objects_op", config_schema=SWEEP_CONFIG_SCHEMA,
           out=dg.Out(dg.Nothing, description="the sweep's totals (output metadata)"))
    def sweep_op(context: dg.OpExecutionContext, log_store: LogStoreResource):
        yield from _sweep(context, log_store, settings, known)

    @dg.job(name=SWEEP_JOB, tags={TRIGGER_TAG: "remote-sweep"},
            description="Delete the remote tier's objects that no retained version names, after "
            "file.delete.delay.ms, and orphans past the floor (logctl sweep); deletes nothing while cleaning is "
            "paused.")
    def sweep_job():
        sweep_op()

    @dg.schedule(name=SWEEP_SCHEDULE, job=sweep_job, execution_timezone="UTC",
                 cron_schedule=cron_for_interval_ms(settings.retention_check_interval_ms),
                 default_status=dg.DefaultScheduleStatus(default_status(settings).value),
                 description=f"Every log.retention.check.interval.ms ({settings.retention_check_interval_ms} ms): "
                 f"one {SWEEP_JOB} run over every tiered topic's partitions.")
    @tick_refusals_first
    def remote_sweep_schedule(context: dg.ScheduleEvaluationContext):
        switch = read_switch(context.instance, settings)
        if switch.paused:
            context.log.info(switch.skip_reason())
            return dg.SkipReason(switch.skip_reason())
        if context.instance.get_run_records(dg.RunsFilter(job_name=SWEEP_JOB, statuses=IN_FLIGHT), limit=1):
            return dg.SkipReason(f"a {SWEEP_JOB} run is queued or running")
        return dg.RunRequest(tags={TRIGGER_TAG: "remote-sweep"})

    return sweep_job, remote_sweep_schedule


@run_refusals_first
def _sweep(context: dg.OpExecutionContext, log_store: LogStoreResource, settings: PlatformSettings,
           known: set[str]):
    config = context.op_config
    switch = read_switch(context.instance, settings)
    if switch.paused:
        context.log.info(f"nothing swept: {switch.skip_reason()}")
        yield dg.Output(None, metadata={"skipped": switch.skip_reason()})
        return
    with log_store.manager() as manager:
        results = sweep_tiered(manager, now_ms_wall=wall_clock_ms(), orphan_min_age_ms=config["orphan_min_age_ms"],
                               dry_run=config["dry_run"])
    for r in results:
        (context.log.error if r.status == FAILED else context.log.info)(r.summary())
        if (r.deleted or r.status == FAILED) and r.topic in known:
            context.log_event(dg.AssetObservation(asset_key=log_asset_key(r.topic), partition=partition_key(r.partition),
                                                  metadata=sweep_metadata(r)))
    yield dg.Output(None, metadata=sweep_run_metadata(results))
    failed = [r for r in results if r.status == FAILED]
    if failed:
        first = failed[0]
        more = f"; and {len(failed) - 1} more partition(s)" if len(failed) > 1 else ""
        raise dg.Failure(description=f"sweep of {first.topic}-{first.partition} failed: {first.reason}{more}",
                         metadata={"failed_partitions": dg.MetadataValue.md(
                             "\n".join(f"* {r.topic}-{r.partition}: {r.reason}" for r in failed))})
