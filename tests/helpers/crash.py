"""The kill tests' switch for the engine's crash points (``storage_engine.faults``).

A crash point kills only a process that armed it. ``crash_env`` gives a subprocess the point's
name in ``LOGPLAT_CRASH_AT`` and puts ``crash_site`` first on ``PYTHONPATH``: its
``sitecustomize`` arms the point in that process and in every Python process it starts (Spark's
workers inherit the driver's ``PYTHONPATH``). A user's ``logctl`` never has that folder on its
path, so the variable alone kills nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from storage_engine import faults

from .paths import REPO

CRASH_AT_ENV = "LOGPLAT_CRASH_AT"
CRASH_SITE = Path(__file__).with_name("crash_site")


def crash_env(point: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) for a subprocess that SIGKILLs itself at
    crash point ``point``, as does every Python process it starts."""
    env = dict(os.environ if base is None else base)
    paths = [str(CRASH_SITE), str(REPO), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    return {**env, CRASH_AT_ENV: point, "PYTHONPATH": os.pathsep.join(paths)}


def arm_from_environment() -> None:
    """Arm the crash point ``LOGPLAT_CRASH_AT`` names, if any (``crash_site/sitecustomize.py``)."""
    if point := os.environ.get(CRASH_AT_ENV):
        faults.arm(point)
