"""``logctl core``: which record core this process runs, what was asked for and why.

The engine's hot paths run the compiled core (``storage_engine.native._core``, Rust) or the
pure-Python reference (:mod:`storage_engine.native`); this command prints the switch's
:func:`~storage_engine.native.status`, the request (``LOGPLAT_CORE``, else ``auto``) and, where
the reference runs, why. A ``LOGPLAT_CORE`` that cannot be honoured (``compiled`` where the core
is not built or is stale, or a name of no implementation) fails every other command before it
starts; here it is reported beside the status, with the same one-line error and exit status 1.
"""

from __future__ import annotations

import argparse
import os

from ... import native
from .arguments import add_json
from .command import Command, LogDirs
from .output import emit


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)


def _run(args: argparse.Namespace, manager: None) -> int:
    status = native.status()
    env = os.environ.get(native.ENV_VAR)
    try:
        native.compiled()
        error = None
    except native.CoreUnavailableError as exc:
        error = str(exc)
    asked = f"{native.ENV_VAR}={env!r}" if env is not None else f"{native.ENV_VAR} unset"
    lines = [f"record core: {'unusable' if error else status.describe()}",
             f"requested:   {status.requested} ({asked})"]
    if status.reason and not error:
        lines.append(f"why:         {status.reason}")
    emit(args, {"core": None if error else status.name, "describe": None if error else status.describe(),
                "requested": status.requested, "reason": status.reason or None, "env": {native.ENV_VAR: env},
                "error": error}, "\n".join(lines))
    if error is not None:
        args.errors.append(error)
    return 1 if error else 0


COMMAND = Command(name="core", help="which record core is in use (compiled or the pure-Python reference), and why",
                  arguments=_arguments, run=_run, log_dirs=LogDirs.NONE, needs_core=False)
