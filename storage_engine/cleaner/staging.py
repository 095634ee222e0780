"""Where a remote (Spark) cleaner's unfinished output lives.

The staged names, the cleaner lock and the removal of stale staged output are the log's
(``storage_engine.log.staging``: the loader removes a dead cleaner's files too); this module
adds the remote tasks' directories: ``.logplat-staging-<job>/`` in the partition directory,
one subdirectory per task attempt, so a retried or speculative attempt never writes over
another's files. The driver moves the winning attempt's files in as ``.cleaning``.
"""

from __future__ import annotations

from pathlib import Path

from ..log.staging import (
    REMOTE_STAGING_PREFIX,
    STAGING_SUFFIX,
    CleanerBusyError,
    CleanerLock,
    remove_stale_staging,
)

__all__ = [
    "REMOTE_STAGING_PREFIX",
    "STAGING_SUFFIX",
    "CleanerBusyError",
    "CleanerLock",
    "make_remote_staging",
    "remote_staging_dir",
    "remove_stale_staging",
]


def remote_staging_dir(partition_dir: Path, job_id: str) -> Path:
    return Path(partition_dir) / f"{REMOTE_STAGING_PREFIX}{job_id}"


def make_remote_staging(path: Path) -> Path:
    """Make a Spark task's staging directory (``remote_staging_dir``, or a directory inside it),
    each level inside an existing parent, never the partition directory above them: a topic
    deleted under the job is not recreated as a directory without metadata (the task fails on
    ``FileNotFoundError`` instead)."""
    levels = [Path(path)]
    while not levels[-1].name.startswith(REMOTE_STAGING_PREFIX):
        if levels[-1].parent == levels[-1]:
            raise ValueError(f"{path} is not inside a Spark staging directory ({REMOTE_STAGING_PREFIX}...)")
        levels.append(levels[-1].parent)
    for level in reversed(levels):
        level.mkdir(exist_ok=True)
    return Path(path)
