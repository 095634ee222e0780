"""What the loader does with the temporary files a crash leaves: a pure plan, applied by
``LogLoader`` (writable open) or described by the read-only view, so both agree.

Kafka's ``LogLoader.removeTempFilesAndCollectSwapFiles`` and ``completeSwapOperations``:
``.deleted`` files go; ``.cleaned`` files go, with every ``.swap`` at or above the smallest
``.cleaned`` base (that swap was still being prepared); a complete ``.log.swap`` replaces
every segment whose base lies in its offset range, then loses its suffix. A ``.log.swap``
that does not parse (torn or failing its CRC), or that does not fit below the active segment
(the cleaner never rewrites the active segment), is removed with its index swaps, as Kafka
deletes an invalid swap, instead of being renamed into the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from .naming import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, is_segment_file, offset_from_file_name


@dataclass
class TempFilePlan:
    """Files to remove (name, why) and swaps to complete (name, new name), in that order."""

    remove: list[tuple[str, str]] = field(default_factory=list)
    rename: list[tuple[str, str]] = field(default_factory=list)

    @property
    def changes_segments(self) -> bool:
        """True when applying the plan changes which files hold the log's segments (a reader
        that ignores temporary files would see something else than a writable open leaves)."""
        return bool(self.rename) or any(not n.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX))
                                        for n, _ in self.remove)

    def describe(self) -> str:
        parts = [f"remove {n} ({why})" for n, why in self.remove] + [f"rename {a} to {b}" for a, b in self.rename]
        return "; ".join(parts)


def plan_temp_files(names: list[str], swap_next_offsets: Mapping[str, int | None]) -> TempFilePlan:
    """The plan for the files ``names`` of one partition directory.

    ``swap_next_offsets`` maps each ``.log.swap`` name to the offset after its last batch, or
    None when it does not consist of complete batches with valid CRCs.
    """
    plan = TempFilePlan()
    seg_names = sorted(n for n in names if is_segment_file(n))
    swaps = [n for n in seg_names if n.endswith(SWAP_SUFFIX)]
    cleaned = [n for n in seg_names if n.endswith(CLEANED_SUFFIX)]
    for n in seg_names:
        if n.endswith(DELETED_SUFFIX):
            plan.remove.append((n, "segment already deleted"))
    for n in cleaned:
        plan.remove.append((n, "cleaning interrupted before its swap"))
    if cleaned:
        min_cleaned = min(offset_from_file_name(n) for n in cleaned)
        for n in [s for s in swaps if offset_from_file_name(s) >= min_cleaned]:
            plan.remove.append((n, "swap interrupted while it was being prepared"))
            swaps.remove(n)
    live_logs = [offset_from_file_name(n) for n in seg_names if n.endswith(LOG_SUFFIX)]
    active_base = max(live_logs) if live_logs else None
    bad: dict[int, str] = {}  # base offset -> why its swap files are removed
    for n in swaps:
        if not n.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        nxt = swap_next_offsets.get(n)
        if nxt is None:
            bad[offset_from_file_name(n)] = "swap that does not parse"
        elif active_base is None or nxt > active_base:
            bad[offset_from_file_name(n)] = "swap reaching past the active segment"
    for n in list(swaps):
        why = bad.get(offset_from_file_name(n))
        if why:
            plan.remove.append((n, why))
            swaps.remove(n)
    log_swaps = [n for n in swaps if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
    if log_swaps:
        lo = min(offset_from_file_name(n) for n in log_swaps)
        hi = max(max(offset_from_file_name(n), swap_next_offsets[n] or 0) for n in log_swaps)
        for n in seg_names:
            if n.endswith((SWAP_SUFFIX, DELETED_SUFFIX, CLEANED_SUFFIX)):
                continue
            if lo <= offset_from_file_name(n) < hi:
                plan.remove.append((n, "replaced by an interrupted swap"))
    for n in swaps:
        plan.rename.append((n, n[: -len(SWAP_SUFFIX)]))
    return plan
