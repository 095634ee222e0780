"""Resources: where the logs are, and the Spark session the cleaning runs use.

Both are the code location's environment, not run config (``fixed_resource``): a run cleans the
log dirs the platform was given, with its broker settings, on its Spark master.

``pyspark`` is dagster-pyspark's ``LazyPySparkResource``: a run that needs no Spark (a sensor, a
check-only run) never starts a JVM. Our subclass builds the session with the jobs' own
``build_spark_session``: the master checked and Java 17 checked before the JVM starts (a clear
error instead of a Py4J stack), the workers running this interpreter (``PYSPARK_PYTHON``: the
engine they import is the one the driver planned with), the engine shipped to a non-local
master, and the ``kafka-log`` data source registered. ``spark.master`` comes from ``LOGPLAT_SPARK_MASTER``; an
``sc://`` value makes the session a Spark Connect client (``spark.remote``): no JVM in the run
worker, the server's warm driver does the work, and every run worker joins the one server session
of its engine (``connect_session``), whose Python workers are warm.

In-process tests get the test session back: ``getOrCreate`` returns the active session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial

import dagster as dg
from dagster_pyspark import LazyPySparkResource

from spark_jobs.runtime.session import build_spark_session, is_remote, session_config
from storage_engine.errors import LogError
from storage_engine.logdir.log_dir import missing_log_dir
from storage_engine.logdir.manager import LogManager

from ..logic.settings import PlatformSettings

APP_NAME = "logplat-dagster"


class LogStore:
    """The log dirs and broker settings every sensor and run opens the engine with.

    They are the code location's environment (``PlatformSettings``), fixed when it loads: the
    resource has no run config (``fixed_resource``), so no run can clean another directory or
    judge a log by other broker settings than the sensors that asked for the run."""

    def __init__(self, log_dirs: Sequence[str], broker_properties: Mapping[str, str]) -> None:
        self.log_dirs: tuple[str, ...] = tuple(log_dirs)
        self.broker_properties: dict[str, str] = dict(broker_properties)

    @contextmanager
    def manager(self, *, read_only: bool = True) -> Iterator[LogManager]:
        """A ``LogManager`` over the log dirs; read-only unless a caller must write (the checks
        and the sensors that read states never do: a read-only manager repairs nothing and
        leaves no session file; ``deleted_files_sensor`` removes expired ``.deleted`` files
        through one: that sweep takes no partition lock and changes no log). A log dir that is
        not there (unmounted, moved, mistyped) is refused, naming it, as ``logctl`` refuses it:
        read as a log dir without topics, it made every sensor say there was nothing to do."""
        for d in self.log_dirs:
            if (why := missing_log_dir(d)) is not None:
                raise LogError(f"log dir {d} {why} (LOGPLAT_LOG_DIRS={','.join(self.log_dirs)}): unmounted, moved or "
                               "mistyped? No log there is read until it is back")
        with LogManager(self.log_dirs, self.broker_properties, read_only=read_only) as manager:
            yield manager


class LogSparkResource(LazyPySparkResource):
    """``LazyPySparkResource`` whose session is the jobs' own (``build_spark_session``) from
    its ``spark_config``, so a run worker's session is built as ``logctl``'s is. The platform
    hands it to runs as a ``fixed_resource``: its ``spark_config`` is the code location's, never
    a run's."""

    @classmethod
    def _is_dagster_maintained(cls) -> bool:
        return False

    def _init_session(self) -> None:
        if self._spark_session is None:
            conf = {k: str(v) for k, v in self.spark_config.items()}
            master = conf.pop("spark.remote", None) or conf.pop("spark.master", None)
            self._spark_session = build_spark_session(master, conf=conf)


def spark_config(master: str) -> dict[str, str]:
    """The session settings: the master (or a Spark Connect server's ``sc://`` URL) with the
    settings that apply to it, and an app name for a session this process starts."""
    return session_config(master) if is_remote(master) else session_config(master, {"spark.app.name": APP_NAME})


#: How the assets, checks, sensors and schedules ask for the log store (Dagster hands them the
#: object itself).
LogStoreResource = dg.ResourceParam[LogStore]


def fixed_resource(make: Callable[[], object], description: str) -> dg.ResourceDefinition:
    """A resource built by ``make`` for each run and tick, whatever a run's config says: its
    config schema is empty, so the launchpad scaffolds nothing to edit and validation refuses any
    entry under ``resources.<name>.config`` (a run config naming ``log_dirs``,
    ``broker_properties`` or ``spark_config`` is refused before the run starts)."""
    return dg.ResourceDefinition(resource_fn=lambda _context: make(), config_schema={}, description=description)


def build_resources(settings: PlatformSettings) -> dict[str, dg.ResourceDefinition]:
    return {
        "log_store": fixed_resource(partial(LogStore, settings.log_dirs, settings.broker_props),
                                    f"The log dirs {', '.join(settings.log_dirs)} (LOGPLAT_LOG_DIRS) and the broker "
                                    "properties (LOGPLAT_SERVER_PROPERTIES) of the code location"),
        # a new resource per run: a session stopped since an earlier run is not handed out again
        "pyspark": fixed_resource(partial(LogSparkResource, spark_config=spark_config(settings.spark_master)),
                                  f"A Spark session on {settings.spark_master} (LOGPLAT_SPARK_MASTER)"),
    }
