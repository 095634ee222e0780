"""Named crash points for the kill tests.

Multi-file changes (segment deletion, the compaction swap) call ``crash_point(name)`` between
their file steps. In production nothing happens: a point kills only a process that armed it
(:func:`arm`), which only the kill tests do, in the subprocesses they start
(``tests/helpers/crash.py``); no environment variable a user could set arms one. An armed
process SIGKILLs itself at that exact step, so the test can reload the log and check it is
either before or after the change, never between.
"""

from __future__ import annotations

import os
import signal

_armed: str | None = None


def arm(name: str | None) -> None:
    """Make ``crash_point(name)`` kill this process (None: no point kills it)."""
    global _armed
    _armed = name


def crash_point(name: str) -> None:
    if name == _armed:
        os.kill(os.getpid(), signal.SIGKILL)
