"""The pause switch (``logic/cleaning_switch.py``) in the Dagster instance, and the two jobs that
set it from the UI: ``pause_cleaning`` (with a reason) and ``resume_cleaning``.

The switch is a value of the instance's key-value storage (``run_storage.get_cursor_values`` /
``set_cursor_values``, where Dagster keeps its own daemon cursors), so it persists with the
instance and every code location load reads the same one. Each job's run shows who paused (the
run's launcher), when and why; the run sensors' and sweeps' ticks repeat it as their skip reason.

(No ``from __future__ import annotations`` here: Dagster reads the ops' ``context`` annotations.)
"""

import time

import dagster as dg

from ..logic.cleaning_switch import SWITCH_KEY, CleaningSwitch, default_switch
from ..logic.settings import PlatformSettings
from .errors import PlatformError
from .jobs import run_topics


def read_switch(instance: dg.DagsterInstance, settings: PlatformSettings) -> CleaningSwitch:
    """The instance's switch, else ``LOGPLAT_CLEANING``'s default; a value this code did not
    write fails the tick naming the key (a tick that guessed "running" would clean while paused)."""
    stored = instance.run_storage.get_cursor_values({SWITCH_KEY}).get(SWITCH_KEY)
    if stored is None:
        return default_switch(settings.cleaning)
    try:
        return CleaningSwitch.parse(stored)
    except ValueError as exc:
        raise PlatformError(str(exc)) from None


def write_switch(instance: dg.DagsterInstance, switch: CleaningSwitch) -> None:
    instance.run_storage.set_cursor_values({SWITCH_KEY: switch.dump()})


@dg.op(config_schema={"reason": dg.Field(str, description="Why cleaning is paused: every tick that skips says it.")})
def pause_cleaning_op(context: dg.OpExecutionContext) -> None:
    reason = context.op_config["reason"].strip()
    if not reason:
        raise dg.Failure("pause_cleaning needs a reason: say why cleaning is paused (the ticks repeat it)",
                         allow_retries=False)
    switch = CleaningSwitch(paused=True, reason=reason, at_ms=int(time.time() * 1000))
    write_switch(context.instance, switch)
    context.log.info(switch.skip_reason())
    # what the sensors and sweeps requested before the pause and still waits in the run queue
    # would clean while paused: cancelled (a run already started finishes)
    queued = context.instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.QUEUED]))
    cancelled = [r.dagster_run.run_id for r in queued if run_topics(r.dagster_run)
                 and context.instance.run_coordinator.cancel_run(r.dagster_run.run_id)]
    if cancelled:
        context.log.info(f"cancelled {len(cancelled)} queued cleaning run(s): {', '.join(cancelled)}")


@dg.op
def resume_cleaning_op(context: dg.OpExecutionContext) -> None:
    write_switch(context.instance, CleaningSwitch(paused=False, at_ms=int(time.time() * 1000)))
    context.log.info("cleaning resumed: the run sensors and sweeps request runs again from their next tick")


@dg.job(name="pause_cleaning", tags={"logplat/trigger": "manual"},
        description="Pause cleaning: compaction_sensor, retention_sensor, tiering_sensor, every sweep__<topic> and "
        "remote_sweep_schedule request no run (and sweep_remote_objects deletes nothing) until resume_cleaning "
        "(log_state_sensor and deleted_files_sensor go on). Needs a reason in the config.")
def pause_cleaning() -> None:
    pause_cleaning_op()


@dg.job(name="resume_cleaning", tags={"logplat/trigger": "manual"},
        description="Resume cleaning after pause_cleaning (or over LOGPLAT_CLEANING=paused).")
def resume_cleaning() -> None:
    resume_cleaning_op()
