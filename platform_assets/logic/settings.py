"""What the code location reads from its environment, once, when it loads.

Everything the platform needs to know about where it runs comes from environment variables, so
the same code serves ``dagster dev``, the daemon's run workers, tests and the main job:

* ``LOGPLAT_LOG_DIRS``: the log dirs (comma-separated; default ``./data/logs``), as for ``logctl``;
* ``LOGPLAT_SERVER_PROPERTIES``: a broker properties file whose ``log.*`` keys set topic defaults
  (Kafka's precedence) and ``log.retention.check.interval.ms`` the sweep cadence;
* ``LOGPLAT_SPARK_MASTER``: the Spark master (default ``local[*]``), or a Spark Connect server
  (``sc://host:port``), whose warm driver every run worker then shares instead of starting a JVM;
* ``LOGPLAT_AUTOMATION``: ``running`` (default) or ``stopped``, the default status of the sensors
  and schedules. ``dagster dev`` should clean logs without a click; tests and demos that want
  to decide when automation starts set ``stopped`` and start it through GraphQL;
* ``LOGPLAT_OWNERS``: the owners every asset names (comma-separated e-mail addresses or
  ``team:<name>``, as Dagster's catalog accepts them; default none);
* ``LOGPLAT_CLEANING``: ``running`` (default) or ``paused``, what the pause switch says while the
  instance holds no value of its own (``cleaning_switch``; the ``pause_cleaning`` and
  ``resume_cleaning`` jobs set one). ``stopped`` automation runs no tick at all; ``paused``
  cleaning keeps the ticks, which say why they request nothing;
* ``LOGPLAT_SENSOR_INTERVAL_S``, ``LOGPLAT_MAX_PARTITIONS_PER_TICK``,
  ``LOGPLAT_MAX_OBSERVATIONS_PER_TICK``: how often sensors look and how much one tick may ask for;
* ``LOGPLAT_STATE_READ_BUDGET_MS``: how long a tick may spend computing partition states it has
  no current one for (``state_cache``: the rest are read at the next ticks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from dagster._core.definitions.utils import is_valid_owner  # Dagster's rule for AssetSpec(owners=...)

from spark_jobs.runtime.session import DEFAULT_MASTER, spark_environment
from storage_engine.config.broker import retention_check_interval_ms
from storage_engine.config.values import INT_MAX
from storage_engine.files.naming import is_digits
from storage_engine.logdir.environment import engine_environment

from .cleaning_switch import CLEANING_STATES

AUTOMATION_STATES = ("running", "stopped")


def _positive_int(environ: Mapping[str, str], name: str, default: int) -> int:
    """A whole number from 1 to 2147483647 in ASCII digits (``int`` alone took ``1_000`` and other
    scripts' digits), or ``default`` when the variable is unset or empty."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip()
    if not is_digits(text) or len(text) > 10 or not 1 <= int(text) <= INT_MAX:
        raise ValueError(f"{name}={raw!r}: expected a whole number from 1 to {INT_MAX}")
    return int(text)


def _owners(environ: Mapping[str, str]) -> tuple[str, ...]:
    """``LOGPLAT_OWNERS`` as a tuple, each one checked by Dagster's rule, so that a bad one fails
    here naming the variable rather than as an invalid asset definition."""
    owners = tuple(o.strip() for o in environ.get("LOGPLAT_OWNERS", "").split(",") if o.strip())
    bad = [o for o in owners if not is_valid_owner(o)]
    if bad:
        raise ValueError(f"LOGPLAT_OWNERS={environ['LOGPLAT_OWNERS']!r}: {bad[0]!r} is neither an e-mail address "
                         "nor team:<name>")
    return owners


@dataclass(frozen=True)
class PlatformSettings:
    """The environment of one code location load (see the module docstring for the variables)."""

    log_dirs: tuple[str, ...]
    broker_props: Mapping[str, str] = field(default_factory=dict)
    spark_master: str = DEFAULT_MASTER
    automation: str = "running"
    cleaning: str = "running"
    sensor_interval_s: int = 30
    max_partitions_per_tick: int = 16
    #: ~2 x 120 events at ~11.6 ms each in the SQLite event log: ~2.8 s of the daemon's writes a tick
    max_observations_per_tick: int = 120
    state_read_budget_ms: int = 1_000
    owners: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.automation not in AUTOMATION_STATES:
            raise ValueError(f"LOGPLAT_AUTOMATION={self.automation!r}: expected one of {', '.join(AUTOMATION_STATES)}")
        if self.cleaning not in CLEANING_STATES:
            raise ValueError(f"LOGPLAT_CLEANING={self.cleaning!r}: expected one of {', '.join(CLEANING_STATES)}")
        retention_check_interval_ms(self.broker_props)  # fail at load, naming the key, not at the first tick

    @classmethod
    def from_env(cls) -> PlatformSettings:
        """The settings, each variable checked as the engine (``engine_environment``) and the
        Spark jobs (``spark_environment``) check it, and as below for the platform's own."""
        env = os.environ
        engine = engine_environment()
        return cls(
            log_dirs=tuple(str(p) for p in engine.log_dirs),
            broker_props=engine.broker_props,
            spark_master=spark_environment().master,
            automation=(env.get("LOGPLAT_AUTOMATION") or "running").strip().lower(),
            cleaning=(env.get("LOGPLAT_CLEANING") or "running").strip().lower(),
            sensor_interval_s=_positive_int(env, "LOGPLAT_SENSOR_INTERVAL_S", 30),
            max_partitions_per_tick=_positive_int(env, "LOGPLAT_MAX_PARTITIONS_PER_TICK", 16),
            max_observations_per_tick=_positive_int(env, "LOGPLAT_MAX_OBSERVATIONS_PER_TICK", 120),
            state_read_budget_ms=_positive_int(env, "LOGPLAT_STATE_READ_BUDGET_MS", 1_000),
            owners=_owners(env),
        )

    @property
    def retention_check_interval_ms(self) -> int:
        return retention_check_interval_ms(self.broker_props)

    @property
    def state_ttl_ms(self) -> int:
        """How long a sensor trusts an unchanged partition's state before recomputing it (time
        retention and compaction lags move with the clock): Kafka's retention check cadence."""
        return self.retention_check_interval_ms
