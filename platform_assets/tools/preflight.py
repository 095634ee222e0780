"""Check the platform's environment before anything starts: ``python -m platform_assets.tools.preflight``.

``scripts/ui.sh`` runs it first. Without it a bad value shows up late and far from its cause: a
``LOGPLAT_AUTOMATION`` typo as a code location that fails to load in the UI, a bad
``LOGPLAT_SPARK_MASTER`` as every run failing, a mistyped ``LOGPLAT_LOG_DIRS`` as a platform with
no topics (whose schedules' state the daemon then drops). Each is one line on stderr and exit
status 1 here, before the servers start.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spark_jobs.runtime.session import spark_environment
from storage_engine.errors import LogError
from storage_engine.logdir.environment import LOG_DIRS_ENV

from ..logic.settings import PlatformSettings


class PreflightError(RuntimeError):
    """The environment names something the platform cannot use; the message says which."""


def check_environment(*, require_log_dirs: bool) -> PlatformSettings:
    """The settings the code location will load, after checking them; ``require_log_dirs``: every
    log dir must exist already (the UI; the main job creates them)."""
    try:
        settings = PlatformSettings.from_env()
    except (ValueError, LogError) as exc:
        raise PreflightError(str(exc)) from None
    if require_log_dirs:
        missing = [d for d in settings.log_dirs if not Path(d).is_dir()]
        if missing:
            raise PreflightError(f"{LOG_DIRS_ENV}: {', '.join(missing)} is not a directory (bash scripts/main.sh "
                                 f"writes a workload into ./data/logs, or point {LOG_DIRS_ENV} at your log dirs)")
    try:  # the master or Spark Connect server answers
        spark_environment(probe=True)
    except LogError as exc:
        raise PreflightError(str(exc)) from None
    return settings


if __name__ == "__main__":
    try:
        check_environment(require_log_dirs=True)
    except PreflightError as exc:
        sys.exit(f"error: {exc}")  # one line on stderr, exit status 1
