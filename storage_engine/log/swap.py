"""The compaction swap: Kafka's ``LocalLog.replaceSegments``, one crash point per file step.

A function over a :class:`~storage_engine.log.log.Log` (as Kafka's is static over the segment
list): ``Log.replace_segments`` calls it under the partition lock, and the loader
(``temp_files``) resolves a kill at any of its steps to the log before or after the swap.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..faults import crash_point
from ..files.durable import fsync_dir
from ..files.naming import CLEANED_SUFFIX, SWAP_SUFFIX

if TYPE_CHECKING:
    from .log import Log
    from .segment import LogSegment


def replace_segments(log: Log, new_segments: Sequence[LogSegment], old_segments: Sequence[LogSegment]) -> None:
    """Kafka's ``LocalLog.replaceSegments`` (lock held): swap ``.cleaned`` replacement
    segments in for ``old_segments``, with a crash point after every file step.

    The replacements become ``.swap`` in descending base order (the commit point is the last
    of these renames: from then on a load completes the swap, see ``temp_files``), the
    directory is fsynced, the old segments are renamed ``.deleted`` (with the producer snapshots
    no replacement starts at), the ``.swap`` files take
    their final names in ascending order, the directory is fsynced again, and the new list is
    published. A kill at any step reloads to the log before or after, never a mix.
    """
    n = 0
    for seg in sorted(new_segments, key=lambda s: s.base_offset, reverse=True):
        for path in seg.existing_files():  # .log first
            os.replace(path, path.with_name(path.name[: -len(CLEANED_SUFFIX)] + SWAP_SUFFIX))
            crash_point(f"compaction.cleaned-to-swap-{n}")
            n += 1
        seg.change_file_suffix(SWAP_SUFFIX)
    # Make the .swap names durable before any old file is renamed away.
    fsync_dir(log.dir)
    crash_point("compaction.after-swap-prepared")
    pending = log.remove_segments(old_segments, {seg.base_offset for seg in new_segments})
    crash_point("compaction.after-old-deleted")
    n = 0
    for seg in sorted(new_segments, key=lambda s: s.base_offset):
        for path in seg.existing_files():
            os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
            crash_point(f"compaction.swap-to-final-{n}")
            n += 1
        seg.change_file_suffix("")
    fsync_dir(log.dir)
    crash_point("compaction.after-dir-fsync")
    log.install_segments(new_segments)
    if log.config.file_delete_delay_ms == 0:
        for path in pending:
            Path(path).unlink(missing_ok=True)
