"""The per-record loops over one v2 batch's bytes: map building (each key's latest offset)
and recopying (which records survive). The offset strategy's loops inline
:func:`~storage_engine.cleaner.rules.retain_record` for speed (the tests run both against each
other); the version strategies' recopy calls
:func:`~storage_engine.cleaner.rules.retain_versioned_record` as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..record.v2 import walk_records as walk_v2_records
from .rules import RecordOutcome, retain_versioned_record

if TYPE_CHECKING:
    from .offset_map import OffsetMap
    from .strategy import RecordVersion


def map_v2_records(buf: bytes, start: int, stop: int, count: int, base_offset: int, min_offset: int,
                   table: dict, remaining: int, overhead: int) -> tuple[bool, int, int, int, int]:
    """Map building's hot loop: put every keyed record of a batch at or above ``min_offset`` into
    ``table`` (key -> offset), charging ``offset_map.entry_cost`` per new key against
    ``remaining``. Stops at the first new key that does not fit.

    Returns ``(complete, remaining, new_keys, last_offset_put, unkeyed)`` (``last_offset_put`` -1
    if none; ``unkeyed`` counts records without a key).
    """
    check_min = base_offset < min_offset
    added = 0
    last = -1
    unkeyed = 0
    for _pos, _end, od, _tsd, key, _tomb in walk_v2_records(buf, count, start, stop):
        if key is None:
            unkeyed += 1
            continue
        off = base_offset + od
        if check_min and off < min_offset:
            continue
        if key in table:
            table[key] = off
        else:
            cost = overhead + ((len(key) + 48) & ~15)  # offset_map.key_object_size, inlined: once per record
            if cost > remaining:
                return False, remaining, added, last, unkeyed
            table[key] = off
            remaining -= cost
            added += 1
        last = off
    return True, remaining, added, last, unkeyed


def filter_v2_records(buf: bytes, start: int, stop: int, count: int, base_offset: int, map_latest_offset: int,
                      table_get, retain_tombstones: bool) -> tuple[list[tuple[int, int, int]], bool, int, int, int]:
    """Recopying's hot loop: :func:`retain_record` for every record of a batch (``buf[start:stop]``).

    ``table_get(key, -1)`` is the offset map's lookup. Returns ``(kept, a kept record is a
    tombstone, duplicates, tombstones, unkeyed)`` where ``kept`` holds ``(start, end, timestamp
    delta)`` per surviving record and ``buf[start:end]`` is its bytes as stored.
    """
    kept: list[tuple[int, int, int]] = []
    keep = kept.append
    has_tomb = False
    dup = tomb = unkeyed = 0
    for pos, end, od, tsd, key, is_tomb in walk_v2_records(buf, count, start, stop):
        off = base_offset + od
        if key is None:
            if off <= map_latest_offset:
                unkeyed += 1
                continue
        elif off <= map_latest_offset:
            if off < table_get(key, -1):
                dup += 1
                continue
            if is_tomb and not retain_tombstones:
                tomb += 1
                continue
        if is_tomb:
            has_tomb = True
        keep((pos, end, tsd))
    return kept, has_tomb, dup, tomb, unkeyed


def filter_versioned_records(buf: bytes, start: int, stop: int, count: int, base_offset: int,
                             version_of: RecordVersion, omap: OffsetMap,
                             retain_tombstones: bool) -> tuple[list[tuple[int, int, int]], bool, int, int, int]:
    """:func:`filter_v2_records` under a version strategy: each keyed record of the mapped range
    is compared with its key's winner in the versioned ``omap`` by ``(version, offset)``; a
    record of the clean section that beats the winner takes its place in the map, so the
    recopy must run in offset order. Same return value as :func:`filter_v2_records`."""
    kept = []
    has_tomb = False
    dup = tomb = unkeyed = 0
    latest = omap.latest_offset
    for pos, end, od, tsd, key, is_tomb in walk_v2_records(buf, count, start, stop):
        off = base_offset + od
        version, winner = 0, None
        if key is not None and off <= latest:
            version, winner = version_of(buf, pos, end, tsd), omap.winner(key)
        outcome, beats = retain_versioned_record(off, key, is_tomb, version, winner=winner, map_latest_offset=latest,
                                                 retain_tombstones=retain_tombstones, newest=omap.newest)
        if beats:
            omap.take(key, version, off)  # type: ignore[arg-type]
        if outcome is RecordOutcome.KEEP:
            has_tomb = has_tomb or is_tomb
            kept.append((pos, end, tsd))
        elif outcome is RecordOutcome.DROP_DUPLICATE:
            dup += 1
        elif outcome is RecordOutcome.DROP_TOMBSTONE:
            tomb += 1
        else:
            unkeyed += 1
    return kept, has_tomb, dup, tomb, unkeyed
