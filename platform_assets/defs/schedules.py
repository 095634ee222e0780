"""The sweep: every ``log.retention.check.interval.ms`` (Kafka's default: 5 minutes), each topic is
checked as a whole, as Kafka's retention check thread does.

A schedule targets one job, and each topic has its own job (its own partition set), so there is
one ``sweep__<topic>`` schedule per topic, all on the same cron. At each tick a sweep reads the
topic's cheap state and, when any partition has deletable segments or is due for compaction,
requests **one** run over the contiguous range of partitions from the first to the last that
needs work (``BackfillPolicy.single_run()``: one Spark job), with ``force_compaction=False``, so
only what Kafka's rules select is cleaned. A partition there for its erasure deadline alone
(``forced_by_deadline``) needs a forced run, as the compaction sensor asks; a forced run cleans
every partition of its range, so the sweep then asks for one run per group of consecutive
partitions that need work instead, forced only where such a partition is. A topic with nothing to do is skipped, which keeps the
run list and the event log free of empty runs. A partition whose cleaning failed in its current
state (whoever launched the run) is judged as the sensors judge it (``cleaning_failures``): left
until it changes after a data error (swept every interval, it failed the same way each time and
filled the Runs page), retried after a backoff after a transient one. While cleaning is paused
(``pause.py``) every sweep skips, saying so. The sweep is the backstop for the sensors: it
catches partitions a sensor left for a later tick (its per-tick bound) or missed because it was
stopped.

Cron counts minutes: the interval is rounded to whole minutes (at least one), then to whole hours
from an hour up; a minute interval that does not divide 60 restarts at each hour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg

from ..logic.catalog import Topic
from ..logic.log_state import PartitionState, TopicPartition, compaction_token, contiguous_runs, forced_by_deadline
from ..logic.partition_keys import partition_key
from ..logic.run_tags import MAX_REASON
from ..logic.runs_in_flight import RANGE_END_TAG, RANGE_START_TAG
from ..logic.settings import PlatformSettings
from .assets import cleanup_run_config
from .errors import tick_refusals_first
from .jobs import REASON_TAG, STATES_TAG, TOPIC_TAG, TRIGGER_TAG
from .partitions import partitions_def_name
from .pause import read_switch
from .resources import LogStoreResource
from .sensors import (
    current_states,
    default_status,
    encode_tokens,
    failure_verdicts,
    in_flight,
    pending_note,
    unreadable_note,
)

MINUTE_MS = 60_000


def cron_for_interval_ms(interval_ms: int) -> str:
    """The cron expression closest to running every ``interval_ms``."""
    minutes = max(1, round(interval_ms / MINUTE_MS))
    if minutes < 60:
        return f"*/{minutes} * * * *" if minutes > 1 else "* * * * *"
    hours = max(1, round(minutes / 60))
    if hours < 24:
        return f"0 */{hours} * * *" if hours > 1 else "0 * * * *"
    return "0 0 * * *"


def sweep_schedule_name(topic: Topic) -> str:
    return f"sweep__{topic.safe_name}"


def build_sweep_schedule(topic: Topic, job: dg.UnresolvedAssetJobDefinition,
                         settings: PlatformSettings) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=sweep_schedule_name(topic),
        cron_schedule=cron_for_interval_ms(settings.retention_check_interval_ms),
        job=job,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus(default_status(settings).value),
        description=f"Every log.retention.check.interval.ms ({settings.retention_check_interval_ms} ms): one run "
        f"over the partitions of {topic.name} that have deletable segments or are due for compaction.",
    )
    @tick_refusals_first
    def _sweep(context: dg.ScheduleEvaluationContext, log_store: LogStoreResource):
        switch = read_switch(context.instance, settings)  # read at every tick: a new topic's sweep honours it too
        if switch.paused:  # the tick's reason (its status tag's tooltip), and its logs
            context.log.info(switch.skip_reason())
            return dg.SkipReason(switch.skip_reason())
        keys = set(context.instance.get_dynamic_partitions(partitions_def_name(topic.name)))
        unreadable: dict[TopicPartition, str] = {}
        pending: set[TopicPartition] = set()
        states = current_states(log_store, settings, [topic.name], unreadable, pending)
        keyed = [s for s in states if partition_key(s.partition) in keys]
        needing = [s for s in keyed if s.needs_cleaning]
        verdicts = failure_verdicts(context.instance, needing, settings)
        retried = [s for s in needing if s.tp not in verdicts.held]
        busy = in_flight(context.instance)
        due = sorted((s for s in retried if s.tp not in busy), key=lambda s: s.partition)
        if not due:
            notes = [f"nothing to sweep in {topic.name} ({len(states)} partition(s))"]
            held_back = {  # why partitions that need work are not swept now; only the reasons that apply
                "that need work have a run queued or running": len(retried) - len(due),
                "wait for log_state_sensor to add their keys": len(states) - len(keyed),
            }
            notes += [f"{count} partition(s) {why}" for why, count in held_back.items() if count]
            if (failed_note := verdicts.note()) is not None:
                notes.append(failed_note)
            if unreadable:
                notes.append(unreadable_note(unreadable))
            if pending:
                notes.append(pending_note(pending))
            return dg.SkipReason("; ".join(notes))
        # a forced run cleans every partition of its range: then only runs of consecutive
        # partitions that need work, each forced only if it holds one asked for by its deadline;
        # no range covers a partition that cannot be read (its run would fail on it), one a
        # queued or running run covers (two runs would clean it at once) or one held back
        runs = (contiguous_runs(due) if forced_by_deadline(due) or unreadable or pending or len(due) < len(needing)
                else [due])
        if (failed_note := verdicts.note()) is not None:
            context.log.info(failed_note)  # the tick's log: it requests runs, so it has no skip reason
        return [dg.RunRequest(  # Dagster dedupes a schedule's run keys within one tick
            run_key=f"sweep:{run[0].partition}-{run[-1].partition}",
            run_config=cleanup_run_config(topic, force_compaction=forced_by_deadline(run)),
            tags={TOPIC_TAG: topic.name, RANGE_START_TAG: partition_key(run[0].partition),
                  RANGE_END_TAG: partition_key(run[-1].partition), TRIGGER_TAG: "sweep",
                  REASON_TAG: _sweep_reason(run, verdicts.attempts),
                  STATES_TAG: encode_tokens(run, {s.tp: compaction_token(s) for s in run})},
        ) for run in runs]

    return _sweep


def _sweep_reason(run: list[PartitionState], attempts: dict[TopicPartition, int]) -> str:
    """A sweep run's ``logplat/reason``: what its partitions need, and the retries among them."""
    compaction = sum(1 for s in run if s.compaction_due)
    retention = sum(1 for s in run if s.deletable_segments)
    retries = [f"{s.partition} (after {attempts[s.tp]} failure(s))" for s in run if s.tp in attempts]
    text = (f"log.retention.check.interval.ms sweep: {compaction} partition(s) due for compaction, "
            f"{retention} with deletable segments") + (f"; retrying {', '.join(retries)}" if retries else "")
    return text[:MAX_REASON]


def build_sweep_schedules(topics: Sequence[Topic], jobs: Mapping[str, dg.UnresolvedAssetJobDefinition],
                          settings: PlatformSettings) -> list[dg.ScheduleDefinition]:
    return [build_sweep_schedule(t, jobs[t.name], settings) for t in topics]
