"""What the loader does with the temporary files a crash leaves: a pure plan, applied by
``LogLoader`` (writable open) or described by the read-only view, so both agree.

Kafka's ``LogLoader.removeTempFilesAndCollectSwapFiles`` and ``completeSwapOperations``:
``.deleted`` files go; ``.cleaned`` files go, with every ``.swap`` at or above the smallest
``.cleaned`` base (that swap was still being prepared); a complete ``.log.swap`` replaces
every segment whose base lies in its offset range, then loses its suffix. A ``.log.swap``
the cleaner cannot have written is removed with its index swaps, as Kafka deletes an invalid
swap, instead of being renamed into the log: one that does not parse (torn or failing its CRC),
that does not fit below the active segment (the cleaner never rewrites the active segment),
whose batches start below the offset its name gives, or that starts inside the segment before
it (a cleaned group starts where its first segment did, at or after the previous segment's
end). Completing any of these would move the log end or leave segments that overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..files.naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    is_segment_file,
    offset_from_file_name,
)


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


def plan_temp_files(names: list[str], swap_spans: Mapping[str, tuple[int, int] | None],
                    next_offset_of: Callable[[int], int]) -> TempFilePlan:
    """The plan for the files ``names`` of one partition directory.

    ``swap_spans`` maps each ``.log.swap`` name to the offsets of its first batch and after its
    last (both its name's offset when it is empty), or None when it does not consist of complete
    batches with valid CRCs; ``next_offset_of`` gives a live segment's next offset, by base.
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
    spans = {offset_from_file_name(n): swap_spans.get(n) for n in swaps if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)}
    bad: dict[int, str] = {}  # base offset -> why its swap files are removed
    for base, span in spans.items():
        # A segment another swap replaces is no neighbour of this one: Kafka's
        # splitOverflowedSegment leaves several swaps for one segment (0 and 50 for one holding
        # 0..99) before that segment goes.
        others = [(b, other[1]) for b, other in spans.items() if b != base and other is not None]
        neighbours = [b for b in live_logs if not any(lo <= b < hi for lo, hi in others)]
        why = _invalid_swap(base, span, live_logs, neighbours, next_offset_of)
        if why:
            bad[base] = why
    for n in list(swaps):
        why = bad.get(offset_from_file_name(n))
        if why:
            plan.remove.append((n, why))
            swaps.remove(n)
    log_swaps = [n for n in swaps if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
    if log_swaps:
        lo = min(offset_from_file_name(n) for n in log_swaps)
        hi = max(span[1] for n in log_swaps if (span := swap_spans[n]) is not None)  # each parsed (else removed)
        for n in seg_names:
            if n.endswith((SWAP_SUFFIX, DELETED_SUFFIX, CLEANED_SUFFIX)):
                continue
            if lo <= offset_from_file_name(n) < hi:
                plan.remove.append((n, "replaced by an interrupted swap"))
    for n in swaps:
        plan.rename.append((n, n[: -len(SWAP_SUFFIX)]))
    return plan


def _invalid_swap(base: int, span: tuple[int, int] | None, live_logs: list[int], neighbours: list[int],
                  next_offset_of: Callable[[int], int]) -> str | None:
    """Why the ``.log.swap`` at ``base`` (its batches spanning ``span``) cannot be the cleaner's;
    None when it can. ``neighbours`` are the live segments no other swap replaces."""
    if span is None:
        return "swap that does not parse"
    first, nxt = span
    active_base = max(live_logs, default=None)
    if active_base is None or base >= active_base or nxt > active_base:
        return "swap reaching past the active segment"
    if first < base:
        return "swap whose batches start below the offset in its name"
    before = max((b for b in neighbours if b < base), default=None)
    if before is not None and next_offset_of(before) > base:
        return f"swap starting inside the segment at {before}"
    return None
