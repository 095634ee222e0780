"""The per-record hot loops over one v2 batch's bytes: map building (each key's latest offset)
and recopying (which records survive). They inline :func:`~storage_engine.cleaner.rules.retain_record`
for speed; the tests run both against each other.
"""

from __future__ import annotations

from ..record.v2 import walk_records as walk_v2_records


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
            cost = overhead + ((len(key) + 48) & ~15)  # offset_map.entry_cost, inlined
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
    kept = []
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
