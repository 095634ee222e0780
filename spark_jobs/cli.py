"""``logctl`` with ``--engine spark``: the Spark jobs plugged into the engine's command line.

:class:`SparkEngine` is the ``spark`` entry point of the group ``logplat.engines``, which the
``logctl`` console script loads when a run asks for it, so ``storage_engine`` never imports
Spark: it is an :class:`~storage_engine.tools.logctl.engines.Engine` that runs the jobs. The
SparkSession is built only when a Spark command runs (``$LOGPLAT_SPARK_MASTER``, default
``local[*]``). :func:`main` (``python -m spark_jobs.cli``) plugs it in explicitly, for a source
tree whose installed metadata does not name the entry point.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from storage_engine.cleaner import CompactionReport
from storage_engine.logdir.manager import LogManager
from storage_engine.tools.logctl import main as logctl_main
from storage_engine.tools.logctl.engines import Engines

from .compaction import compact_partitions
from .retention import retention_partitions
from .runtime.session import build_spark_session


class SparkEngine:
    """Runs ``logctl compact`` and ``logctl retention`` as Spark jobs over the same log dirs."""

    def __init__(self) -> None:
        self._spark = None
        self.owns_session = False

    @property
    def spark(self):
        """The process's active session if there is one (then it is not ours to stop), else a new one."""
        if self._spark is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            self.owns_session = active is None
            self._spark = active or build_spark_session(app_name="logctl")
        return self._spark

    def stop(self) -> None:
        if self._spark is not None and self.owns_session:
            self._spark.stop()
        self._spark = None

    def compact(self, manager: LogManager, partitions: list[tuple[str, int]] | None, *, force: bool,
                now_ms: int) -> list[CompactionReport]:
        """``partitions`` (None: every compacted one) as one Spark job, chosen and forced as for
        ``--engine local`` (``storage_engine.tools.logctl.compact.compaction_choice``)."""
        if partitions == []:
            return []
        _refuse_first(manager, None if partitions is None else {t for t, _ in partitions},
                      None if partitions is None else set(partitions))
        result = compact_partitions(self.spark, partitions=partitions, now_ms=now_ms, force=force, manager=manager)
        return result.outcomes

    def retention(self, manager: LogManager, topic: str | None, *, now_ms: int, dry_run: bool) -> list[dict]:
        chosen = None
        if topic is not None:  # its partitions with a directory, as local retention plans (an unknown topic refused)
            manager.partitions(topic)
            chosen = sorted(manager.partition_locations(topic))
        _refuse_first(manager, topic)
        result = retention_partitions(self.spark, partitions=chosen, now_ms=now_ms, dry_run=dry_run, manager=manager)
        # a partition whose stats could not be read failed before it had a plan: it is still listed
        return [o.to_dict() for o in result.outcomes]


def _refuse_first(manager: LogManager, topics: str | set[str] | None,
                  only: set[tuple[str, int]] | None = None) -> None:
    """Read the stats of every partition the command covers before any job starts, as
    ``--engine local`` plans them all first: a partition the engine refuses (a misnamed segment
    file, a directory where a file belongs) refuses the whole command, naming it, before
    anything changes. The jobs leave such checks to each task, which let the other partitions be
    cleaned and reported the refused one as failed: the two engines did different things. (A
    Dagster run checks only its own partitions: another one that cannot be read is not its.)"""
    for _ in manager.partition_stats(topics, only):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """``logctl`` with the Spark engine, whatever the installed entry points say."""
    return logctl_main(argv, engines=Engines({"spark": SparkEngine}))


if __name__ == "__main__":
    sys.exit(main())
