"""What a partition's log needs from the log dir that holds it, typed as a Protocol.

Kafka's ``UnifiedLog`` does not read the log dir's checkpoint files itself: the ``LogManager``
hands it the recovery point and log start offset, writes the checkpoints back, and knows
whether the dir had a clean shutdown. Here a ``Log`` keeps a reference to its log dir for the
same facts, and this Protocol names exactly which ones, so the log (one partition) does not
import the log dir (many partitions, ``logdir.log_dir.LogDir``, which satisfies it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .checkpoint import CheckpointFile


class LogDirState(Protocol):
    """The log dir as one of its logs sees it: its checkpoints and its recovery flags."""

    path: Path
    recovery_points: CheckpointFile  # Kafka's recovery-point-offset-checkpoint
    log_start_offsets: CheckpointFile  # log-start-offset-checkpoint
    cleaner_offsets: CheckpointFile  # cleaner-offset-checkpoint
    recovery_pending: bool  # a reader's view: the next writable open of the dir recovers it

    def refresh_recovery_pending(self) -> None:
        """Ask again whether the next writable open recovers the dir (writers come and go)."""

    def record_load_failure(self, partition: tuple[str, int] | None = None) -> None:
        """Note that a partition failed to load or undo, so the dir gets no clean-shutdown marker."""
