"""What a job reports for each partition, spelled once for the Spark jobs, ``logctl``'s report
of them (``--engine spark``) and the platform. It lives in the engine, which imports neither of
the others, so every one of them can use it.

Ordered from most to least telling: when a run reports several for one partition (a compaction
and then a retention), the platform shows the first of :data:`BY_IMPORTANCE` among them.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    FAILED = "failed"  # a task could not read or write it (corrupt input, I/O error): nothing swapped
    CHANGED = "changed"  # another writer changed it under the job: nothing committed, the next run sees it
    COMPACTED = "compacted"
    TIERED = "tiered"  # segments copied to the remote tier (and local copies past local retention removed)
    DELETED = "deleted"  # retention deleted segments
    SKIPPED = "skipped"  # nothing to clean, not due, or another cleaner is at work
    PLANNED = "planned"  # a retention dry run found something to delete
    NOTHING = "nothing"  # retention found nothing due


FAILED, CHANGED, COMPACTED, TIERED, DELETED, SKIPPED, PLANNED, NOTHING = Outcome
BY_IMPORTANCE = tuple(Outcome)
