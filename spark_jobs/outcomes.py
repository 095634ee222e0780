"""What a job reports for each partition, spelled once for both jobs and the platform.

Ordered from most to least telling: when a run reports several for one partition (a compaction
and then a retention), the platform shows the first of :data:`BY_IMPORTANCE` among them.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    FAILED = "failed"  # a task could not read or write it (corrupt input, I/O error): nothing swapped
    CHANGED = "changed"  # another writer changed it under the job: nothing committed, the next run sees it
    COMPACTED = "compacted"
    DELETED = "deleted"  # retention deleted segments
    SKIPPED = "skipped"  # nothing to clean, not due, or another cleaner is at work
    PLANNED = "planned"  # a retention dry run found something to delete
    NOTHING = "nothing"  # retention found nothing due


FAILED, CHANGED, COMPACTED, DELETED, SKIPPED, PLANNED, NOTHING = Outcome
BY_IMPORTANCE = tuple(Outcome)
