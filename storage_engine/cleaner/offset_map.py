"""The cleaner's key -> latest offset map: exact on every key, bounded like Kafka's.

Kafka's ``SkimpyOffsetMap`` stores a 16-byte MD5 digest and an 8-byte offset per key (24 bytes)
and compares keys *by digest only*, so two keys whose digests collide share one entry and the
older key's live record is dropped. This map never does that:

* **Exactness.** By default the table is a ``dict`` keyed by the key bytes themselves. CPython's
  dict hashes the key and, whenever two hashes match, compares the full key bytes before
  treating them as equal, so a hash collision costs a probe, never a record. With a custom
  ``hash_fn`` (tests force collisions with one that maps every key to a handful of values; a
  distributed job may want a stable hash) the table is keyed by that hash and each slot holds
  ``(key, offset)``; a second, different key landing on an occupied slot turns the slot into a
  small side dict of the colliding keys, compared exactly.

* **Memory.** The budget is ``log.cleaner.dedupe.buffer.size`` (per cleaner thread) times
  ``log.cleaner.io.buffer.load.factor``, as in Kafka. Every new key is charged what it costs
  this process, measured as resident memory rather than as requested bytes (see
  :func:`entry_cost`): the key's ``bytes`` object in its 16-byte allocator class, the offset's
  ``int`` (32), the dict slot at its worst including the moment a resize holds the old and the
  new table at once (96), its slot in the sorted offsets list the recopy builds (8) and the
  allocator's own overhead (24) -- 224 bytes for a 16-byte key, which the benchmark's resident
  memory confirms. Kafka's reference is 24 bytes a key; a Python object graph cannot get
  there, so the same budget holds about a ninth as many keys, and a log with more distinct
  keys is cleaned in more passes. Updating a key already present costs nothing.

* **Versions** (a ``timestamp`` or ``header`` compaction strategy, see :mod:`.strategy`). The
  map then also holds each key's winning version in a second exact dict, and each new key is
  charged :data:`VERSION_ENTRY_COST` more: its slot there and the version's ``int`` (KIP-280:
  memory per key grows by the version; Kafka's would grow by 8 bytes). The offset of a key is
  that of its winning record, which is no longer always its latest.

* **Filling up.** ``put`` refuses the first new key that does not fit; the caller stops mapping
  there and cleans only up to the last mapped offset (a partial pass, whose checkpoint then
  moves only that far), as Kafka does when its map is full.

* **Under the compiled core** (``storage_engine.native``, issue 36) the default layout (no
  ``hash_fn``, not versioned) stores its keys in the core's ``KeyMap`` (``native/src/keymap.rs``)
  instead of the dict, with the same exactness (a hash tag match is confirmed by comparing the
  whole key) and a second cost model: what that map really holds, an 8-byte slot per key at
  most 90% full (8.9 bytes) plus an arena entry of a 6-byte offset delta, the key's length
  varint and the key (15.9 bytes + the key; 31.9 for a 16-byte key in a full map, as its slot
  table grows ahead of its keys). ``used_bytes`` is that map's own slot table plus arena, so
  ``fill``, ``bytes_per_entry`` and ``capacity_entries`` describe what is in memory, and the same
  budget holds about seven times the keys: a log is cleaned in fewer passes than under the
  reference. The versioned layout (a ``timestamp``/``header`` strategy) and the ``hash_fn``
  layout stay the reference's dicts under either core; :meth:`OffsetMap.exact` (the Spark job's
  merged span maps, unbudgeted) loads its dict into a ``KeyMap`` under the compiled core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from .. import native

#: Per entry, besides the key object: dict slot at the worst fill and during a resize (96), the
#: offset int (32), its slot in the sorted offsets list (8), allocator overhead (24).
ENTRY_OVERHEAD = 96 + 32 + 8 + 24
#: The hashed layout adds the hash int (48) and the (key, offset) tuple (64) per entry.
ENTRY_OVERHEAD_HASHED = ENTRY_OVERHEAD + 48 + 64
#: A versioned map adds, per key, a slot in its versions dict (96) and the version int (32).
VERSION_ENTRY_COST = 96 + 32
#: Kafka's bytes per entry (16-byte MD5 + 8-byte offset), for comparison in reports.
KAFKA_BYTES_PER_ENTRY = 24
#: The compiled ``KeyMap``'s bytes per key besides the key, in a full map, rounded up: an 8-byte
#: slot at 90% load (8.9), a 6-byte offset delta and a one-byte key length (keys under 128 bytes).
COMPILED_ENTRY_OVERHEAD = 16


def key_object_size(key_length: int) -> int:
    """Resident size of a ``bytes`` object of this length: 33 bytes of header and the data,
    rounded up to pymalloc's 16-byte size classes."""
    return (33 + key_length + 15) & ~15


def entry_cost(key_length: int, *, hashed: bool = False) -> int:
    """What one new key of ``key_length`` bytes is charged against the budget (the reference's
    dict; see :meth:`OffsetMap.capacity_for` for either core)."""
    return (ENTRY_OVERHEAD_HASHED if hashed else ENTRY_OVERHEAD) + key_object_size(key_length)


class OffsetMap:
    """key bytes -> offset of the latest record with that key in the mapped range."""

    def __init__(
        self,
        memory_bytes: int,
        load_factor: float = 0.9,
        *,
        hash_fn: Callable[[bytes], int] | None = None,
        versioned: bool = False,
    ) -> None:
        if memory_bytes <= 0 or not 0 < load_factor <= 1:
            raise ValueError(f"invalid offset map size {memory_bytes} / load factor {load_factor}")
        self.memory_bytes = memory_bytes
        self.load_factor = load_factor
        self.capacity_bytes = int(memory_bytes * load_factor)
        self.hash_fn = hash_fn
        self.clear(versioned=versioned)

    @classmethod
    def exact(cls, latest: dict[bytes, int], latest_offset: int) -> OffsetMap:
        """A map over a complete key -> latest offset table built elsewhere (a distributed map
        build merges one per segment), without a budget. The reference uses the dict as it is;
        under the compiled core its keys are loaded once into a ``KeyMap``, so the recopy's
        lookups run compiled (the dict stays the caller's), unless their offsets are further apart
        than that map holds."""
        core = native.compiled()
        if core is not None:
            keymap = core.KeyMap(1 << 62)
            try:
                keymap.put_dict(latest)
            except OverflowError:  # offsets further apart than its 48-bit deltas: the dict holds them
                pass
            else:
                return cls.over_keymap(core, keymap, latest_offset)
        omap = cls(1 << 62)
        omap._core = omap._keymap = None
        omap.overhead = ENTRY_OVERHEAD
        omap._table = latest
        omap._entries = len(latest)
        omap.latest_offset = latest_offset
        return omap

    @classmethod
    def over_keymap(cls, core: ModuleType, keymap: Any, latest_offset: int) -> OffsetMap:
        """:meth:`exact` over a complete compiled ``KeyMap`` of ``core`` built elsewhere (the Spark
        job's span maps, merged as they are loaded), without a budget; the map is the caller's."""
        omap = cls(1 << 62)
        omap._core = core
        omap._keymap = keymap
        omap._entries = len(keymap)
        omap.used_bytes = keymap.used_bytes
        omap.latest_offset = latest_offset
        return omap

    @staticmethod
    def capacity_for(keys: int, key_length: int, *, versioned: bool = False) -> int:
        """The smallest usable budget (``capacity_bytes``) that holds ``keys`` distinct keys of
        ``key_length`` bytes in the default layout under the core in use (tests size maps with it)."""
        core = native.compiled()
        if core is None or versioned:
            return keys * (entry_cost(key_length) + (VERSION_ENTRY_COST if versioned else 0))
        return int(core.KeyMap.capacity_for(keys, key_length))

    def clear(self, *, versioned: bool = False) -> None:
        """Empty the map, for keys' latest offsets or (``versioned``) their winning versions. The
        default layout goes into the compiled ``KeyMap`` when the compiled core is in use."""
        self.versioned = versioned
        core = native.compiled() if self.hash_fn is None and not versioned else None
        self._core: ModuleType | None = core
        self._keymap: Any = None if core is None else core.KeyMap(max(self.capacity_bytes, 1))
        if core is not None:
            self.overhead = COMPILED_ENTRY_OVERHEAD
        else:
            self.overhead = (ENTRY_OVERHEAD if self.hash_fn is None else ENTRY_OVERHEAD_HASHED) + (
                VERSION_ENTRY_COST if versioned else 0)
        self._table: dict = {}
        self._versions: dict[bytes, int] = {}
        self.newest: tuple[bytes, int, int] | None = None  # a versioned map's newest record: key, version, offset
        self._entries = 0
        self.used_bytes = 0
        self.latest_offset = -1
        self.collisions = 0  # keys that landed on a slot another key holds (hashed layout)

    # ------------------------------------------------------------------ facts

    @property
    def size(self) -> int:
        return self._entries

    def __len__(self) -> int:
        return self._entries

    @property
    def fill(self) -> float:
        """Bytes charged over the usable budget (budget x load factor)."""
        return self.used_bytes / self.capacity_bytes if self.capacity_bytes else 0.0

    @property
    def bytes_per_entry(self) -> float:
        return self.used_bytes / self._entries if self._entries else float(self.overhead)

    def capacity_entries(self) -> int:
        """How many keys the budget holds at the mean cost per key so far (16-byte keys if empty)."""
        if self._entries:
            per_key = self.used_bytes / self._entries
        else:
            per_key = self.overhead + (16 if self._keymap is not None else key_object_size(16))
        return int(self.capacity_bytes // per_key)

    @property
    def keymap(self) -> Any:
        """The compiled ``KeyMap`` holding this map's keys, None when the reference dicts do."""
        return self._keymap

    @property
    def core(self) -> ModuleType | None:
        """The compiled core module that made :attr:`keymap` (None with the reference)."""
        return self._core

    # ------------------------------------------------------------------ updates

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset`` (offsets arrive in increasing order); False when a new key
        does not fit, in which case nothing changed."""
        if self._keymap is not None:
            return self._put_compiled(key, offset)
        if self.hash_fn is not None:
            return self._put_hashed(key, offset)
        table = self._table
        n = len(table)
        table[key] = offset
        if len(table) != n:
            cost = self.overhead + ((len(key) + 48) & ~15)  # key_object_size, inlined: once per record
            if self.used_bytes + cost > self.capacity_bytes:
                del table[key]
                return False
            self.used_bytes += cost
            self._entries += 1
        self.latest_offset = offset
        return True

    def put_all(self, pairs: Iterable[tuple[int, bytes]]) -> int:
        """``put`` each ``(offset, key)`` in order; returns how many were taken before one did not
        fit (all of them when the map never filled). The hot loop of map building."""
        if self._keymap is not None:
            taken = 0
            for offset, key in pairs:
                if not self._put_compiled(key, offset):
                    return taken
                taken += 1
            return taken
        if self.hash_fn is not None:
            taken = 0
            for offset, key in pairs:
                if not self._put_hashed(key, offset):
                    return taken
                taken += 1
            return taken
        table = self._table
        overhead = self.overhead
        cap = self.capacity_bytes
        used = self.used_bytes
        added = 0
        taken = 0
        last = self.latest_offset
        try:
            for offset, key in pairs:
                n = len(table)
                table[key] = offset
                if len(table) != n:
                    cost = overhead + ((len(key) + 48) & ~15)  # key_object_size, inlined: once per record
                    if used + cost > cap:
                        del table[key]
                        return taken
                    used += cost
                    added += 1
                last = offset
                taken += 1
            return taken
        finally:
            self.used_bytes = used
            self._entries += added
            if last > self.latest_offset:
                self.latest_offset = last

    def put_version(self, key: bytes, version: int, offset: int) -> bool:
        """A versioned map's ``put``: the record at ``offset`` (offsets arrive in increasing order)
        becomes its key's winner when its version is at least the winner's (``(version, offset)``
        order); either way it is the latest mapped offset. False when a new key does not fit."""
        old = self._versions.get(key)
        if old is not None and version < old:
            self.latest_offset = offset
            self.newest = (key, version, offset)
            return True
        if not self.put(key, offset):
            return False
        self._versions[key] = version
        self.newest = (key, version, offset)
        return True

    def winner(self, key: bytes) -> tuple[int, int] | None:
        """A versioned map's ``(version, offset)`` of the record winning ``key``, None if unmapped."""
        version = self._versions.get(key)
        return None if version is None else (version, self.get(key))

    def take(self, key: bytes, version: int, offset: int) -> None:
        """Make an older record (of the clean section) the winner of a mapped ``key``: the recopy
        found that it beats the dirty section's winner. Charges nothing (the key is mapped) and
        leaves ``latest_offset`` where it is."""
        latest = self.latest_offset
        self.put(key, offset)
        self._versions[key] = version
        self.latest_offset = latest

    def _put_compiled(self, key: bytes, offset: int) -> bool:
        km = self._keymap
        if not km.put(key, offset):
            return False
        self.account_compiled(offset)
        return True

    def _put_hashed(self, key: bytes, offset: int) -> bool:
        table = self._table
        h = self.hash_fn(key)  # type: ignore[misc]
        slot = table.get(h)
        if slot is None:
            if not self._charge(key):
                return False
            table[h] = (key, offset)
        elif type(slot) is tuple:
            if slot[0] == key:
                table[h] = (key, offset)
            else:
                if not self._charge(key):
                    return False
                self.collisions += 1
                table[h] = {slot[0]: slot[1], key: offset}
        else:
            if key not in slot:
                if not self._charge(key):
                    return False
                self.collisions += 1
            slot[key] = offset
        self.latest_offset = offset
        return True

    def _charge(self, key: bytes) -> bool:
        cost = self.overhead + key_object_size(len(key))
        if self.used_bytes + cost > self.capacity_bytes:
            return False
        self.used_bytes += cost
        self._entries += 1
        return True

    # ------------------------------------------------------------------ lookups

    def get(self, key: bytes) -> int:
        """The mapped offset of ``key``, or -1 when the key is not in the map."""
        if self._keymap is not None:
            return int(self._keymap.get(key))
        if self.hash_fn is None:
            return self._table.get(key, -1)
        slot = self._table.get(self.hash_fn(key))
        if slot is None:
            return -1
        if type(slot) is tuple:
            return slot[1] if slot[0] == key else -1
        return slot.get(key, -1)

    def exact_table(self) -> dict | None:
        """The key -> offset dict of the default layout (None for the hashed layout), for a caller
        that fuses record walking with insertion; it must report what it added via :meth:`account`
        and charge :func:`entry_cost` per new key within ``capacity_bytes - used_bytes``. None as
        well when the compiled :attr:`keymap` holds the keys."""
        return self._table if self.hash_fn is None and self._keymap is None else None

    def account(self, new_entries: int, new_bytes: int, last_offset: int) -> None:
        """Record what a fused caller put into :meth:`exact_table`."""
        self._entries += new_entries
        self.used_bytes += new_bytes
        if last_offset > self.latest_offset:
            self.latest_offset = last_offset

    def account_compiled(self, last_offset: int) -> None:
        """Take the facts of the compiled :attr:`keymap` after a caller put keys into it."""
        km = self._keymap
        self._entries = len(km)
        self.used_bytes = km.used_bytes
        if last_offset > self.latest_offset:
            self.latest_offset = last_offset

    def sorted_offsets(self) -> list[int]:
        """Every mapped offset, ascending: the records that win their key within the mapped range.

        A record of the mapped range is the latest for its key exactly when its offset is in this
        list (offsets are unique), so the recopy can drop a batch holding none without reading it.
        A versioned map adds its latest offset: the newest mapped record always stays.
        """
        if self._keymap is not None:
            return self._keymap.sorted_offsets()
        if self.hash_fn is None:
            out = list(self._table.values())
        else:
            out = []
            for slot in self._table.values():
                if type(slot) is tuple:
                    out.append(slot[1])
                else:
                    out.extend(slot.values())
        if self.versioned and self.latest_offset >= 0:
            out.append(self.latest_offset)
            out = list(set(out))
        out.sort()
        return out

    def raw_table_get(self) -> Callable | None:
        """``dict.get`` of the exact-key table (call as ``get(key, -1)``), None for the hashed layout
        and the compiled :attr:`keymap`."""
        return self._table.get if self.hash_fn is None and self._keymap is None else None

    def __repr__(self) -> str:
        return (
            f"OffsetMap(entries={self._entries}, used={self.used_bytes}/{self.capacity_bytes} bytes, "
            f"latest_offset={self.latest_offset})"
        )
