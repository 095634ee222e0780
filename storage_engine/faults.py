"""Named crash points for the kill tests.

Multi-file changes (segment deletion, the compaction swap) call ``crash_point(name)`` between
their file steps. In production nothing happens. A test runs the change in a real subprocess
with ``LOGPLAT_CRASH_AT=<name>``, and the process SIGKILLs itself at that exact step, so the
test can reload the log and check it is either before or after the change, never between.
"""

from __future__ import annotations

import os
import signal

ENV = "LOGPLAT_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
