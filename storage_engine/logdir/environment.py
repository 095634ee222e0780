"""The engine's environment: every ``LOGPLAT_*`` variable the engine reads is read and checked
here, by the rules the engine applies when it opens the log dirs, so a value it would refuse is
refused in one line before anything starts (``logctl``, the platform's code location and its
preflight). The Spark jobs' variables are read and checked in ``spark_jobs.runtime.session``
(``spark_environment``); the platform's own in ``platform_assets.logic.settings``.

* ``LOGPLAT_LOG_DIRS``: the log dirs, comma-separated (default ``./data/logs``), each one the
  engine opens (``log_dir.check_log_dirs``: none twice, none nested, no partition directory);
* ``LOGPLAT_SERVER_PROPERTIES``: a broker ``server.properties`` whose ``log.*`` keys set the
  topic defaults (``config.properties``); its ``cordoned.log.dirs`` must name log dirs of
  these (``placement.check_cordoned_log_dirs``).

It sits in ``logdir/`` because checking the log dirs is the manager's rule, which the
configuration layer below may not import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config.properties import read_server_properties
from ..errors import EnvironmentValueError, LogError
from .log_dir import check_log_dirs
from .placement import check_cordoned_log_dirs

LOG_DIRS_ENV = "LOGPLAT_LOG_DIRS"
SERVER_PROPERTIES_ENV = "LOGPLAT_SERVER_PROPERTIES"
DEFAULT_LOG_DIRS = "./data/logs"


@dataclass(frozen=True)
class EngineEnvironment:
    """The engine's settings from the environment, checked (see the module docstring)."""

    log_dirs: tuple[Path, ...]
    broker_props: Mapping[str, str] = field(default_factory=dict)


def engine_environment(log_dirs: str | None = None) -> EngineEnvironment:
    """The log dirs (``log_dirs``, a ``--log-dirs`` value, else ``$LOGPLAT_LOG_DIRS``) and the
    broker properties, each checked as the engine checks them."""
    environment = EngineEnvironment(tuple(log_dirs_from_env(log_dirs)), broker_props_from_env())
    check_cordoned_log_dirs(environment.log_dirs, environment.broker_props)
    return environment


def log_dirs_from_env(value: str | None = None) -> list[Path]:
    """``--log-dirs`` / ``LOGPLAT_LOG_DIRS``: a comma-separated list, default ``./data/logs``, as
    given (not resolved), once ``log_dir.check_log_dirs`` accepts it. An empty ``--log-dirs ""``
    names no directory (an error), where an empty variable is unset. A refused variable is named
    with its value; a refused option's message is the engine's own (the user just typed it)."""
    raw = value if value is not None else os.environ.get(LOG_DIRS_ENV) or DEFAULT_LOG_DIRS
    try:
        dirs = [Path(p.strip()) for p in raw.split(",") if p.strip()]
        if not dirs:
            raise LogError(f"no log directory in {raw!r}")
        check_log_dirs(dirs)
    except LogError as exc:
        if value is not None:
            raise
        raise EnvironmentValueError(f"{LOG_DIRS_ENV}={raw!r}: {exc}") from None
    return dirs


def broker_props_from_env() -> dict[str, str]:
    """The broker's ``log.*`` settings from the file named by ``$LOGPLAT_SERVER_PROPERTIES``,
    read and validated (``read_server_properties``); none when the variable is unset."""
    path = os.environ.get(SERVER_PROPERTIES_ENV)
    return read_server_properties(path, SERVER_PROPERTIES_ENV) if path else {}
