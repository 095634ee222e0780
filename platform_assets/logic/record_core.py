"""Which record core did the work: the ``record core`` metadata entry of what the platform records.

The engine's hot paths run the compiled core or the pure-Python reference
(``storage_engine.native``; ``logctl core`` says which for its own process). A cleaning run's
work happens in Spark's Python workers, which import the engine afresh and choose from the
``LOGPLAT_CORE`` they inherit, so the run asks them, one tiny task per task slot, rather than
trusting its own process's choice; the cleaning report, made where the sensors run, names that
process's core."""

from __future__ import annotations

from typing import Any

import dagster as dg

from spark_jobs.distribute import each, run_tasks, task_slots
from storage_engine import native

RECORD_CORE = "record core"


def executors_core(spark) -> str:
    """The record core of the session's Python workers, as ``native.status().describe()`` says
    it; every distinct answer, joined, if the workers disagree. One job of a task per slot
    (about 0.15 s on a warm local session)."""
    # a lambda travels by value: the workers need only the engine, not this package
    answers = run_tasks(spark, [[slot] for slot in range(task_slots(spark))],
                        each(lambda _: native.status().describe()))
    return "; ".join(sorted(set(answers)))


def record_core_metadata(described: str | None = None) -> dict[str, Any]:
    """The ``record core`` entry: ``described`` (an executors' answer), else this process's."""
    return {RECORD_CORE: dg.MetadataValue.text(described or native.status().describe())}
