//! The cleaner's compact exact key -> offset map (issue 36): `OffsetMap`'s default layout at
//! about 16 bytes a key plus the key's own bytes, where the Python dict costs 224 for a 16-byte
//! key. Kafka's `SkimpyOffsetMap` takes 24 bytes a key but compares MD5 digests only, so two
//! colliding keys share an entry and a live record is lost; this map compares whole keys.
//!
//! Layout:
//! * an **arena** of entries appended in first-seen order: the offset as a 6-byte
//!   little-endian signed delta from the map's first offset (a batch may hold offset deltas
//!   below its first record's, which the reference accepts), the key length as an unsigned LEB128
//!   varint, the key bytes (7 + key bytes for keys under 128 bytes);
//! * an open-addressing **slot table** (linear probing) of 8-byte slots: a 24-bit hash tag and
//!   the 40-bit arena position + 1 (0 is an empty slot). A probe compares whole keys only where
//!   the tag matches, so a hash collision costs a comparison, never a record. Slots are kept at
//!   most 90% full (`log.cleaner.io.buffer.load.factor`'s default), hence 8 / 0.9 = 8.9 bytes a
//!   key: 15.9 bytes of overhead a key in a full map.
//!
//! **Budget.** The map lives within `capacity` bytes (dedupe buffer x load factor): slot table
//! bytes + arena bytes, exactly what `used_bytes` reports. The slot table doubles while that
//! fits; once doubling would outgrow the share a balanced map needs (the slots for as many keys
//! as the budget holds at the mean entry size so far) it grows to that share instead, and when
//! even that does not fit, to whatever room is left, so a full map ends near 90% slot load and
//! rehashes O(log n) times. `put` refuses the first new key whose entry (and the slot growth it
//! needs) does not fit, and changes nothing then: the cleaner stops the pass there (a partial
//! pass, as Kafka's full map does). The transient peak of a rehash (old + new table) is not
//! charged, as the Python dict's resize is charged at its worst instead.
//!
//! The hash is seeded per map (a multiply-xorshift over 8-byte words), so keys a producer
//! chooses cannot be aimed at one probe chain.
use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::collections::hash_map::RandomState;

use crate::batch;
use crate::buffers::{view, Buf};
use std::hash::{BuildHasher, Hasher};

/// Offsets are stored as signed 48-bit deltas from the map's first offset.
pub const MAX_DELTA: i64 = (1 << 47) - 1;
const POS_BITS: u32 = 40;
const POS_MASK: u64 = (1 << POS_BITS) - 1;
const TAG_MASK: u64 = (1 << 24) - 1;
const DELTA_BYTES: usize = 6;
const SLOT_BYTES: usize = 8;
/// Slots are grown before they are fuller than this.
const SLOT_LOAD: f64 = 0.9;

/// Bytes of one arena entry for a key of `key_len` bytes.
pub fn entry_len(key_len: usize) -> usize { DELTA_BYTES + leb_len(key_len) + key_len }

fn leb_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// The accounting alone (no keys): how the slot table grows and what fits. `KeyMapCore` follows
/// it for every insert and `capacity_for` replays it, so both agree by construction.
#[derive(Clone, Copy, Debug, Default)]
pub struct Budget {
    pub capacity: usize,
    pub slots: usize,
    pub entries: usize,
    pub arena: usize,
}

impl Budget {
    pub fn used(&self) -> usize { self.slots * SLOT_BYTES + self.arena }

    /// The slot count after admitting one more entry of `elen` arena bytes, or None when it
    /// does not fit.
    pub fn admit(&self, elen: usize) -> Option<usize> {
        let need = self.entries + 1;
        let mut slots = self.slots;
        if need as f64 > slots as f64 * SLOT_LOAD {
            let min_slots = (need as f64 / SLOT_LOAD).ceil() as usize;
            let mean = (self.arena + elen) as f64 / need as f64;
            let final_keys = self.capacity as f64 / (SLOT_BYTES as f64 / SLOT_LOAD + mean);
            let balanced = ((final_keys / SLOT_LOAD).ceil() as usize).max(min_slots + min_slots / 16 + 1);
            slots = (slots * 2).max(8).min(balanced).max(min_slots);
            if slots * SLOT_BYTES + self.arena + elen > self.capacity {
                let room = self.capacity.saturating_sub(self.arena + elen) / SLOT_BYTES;
                if room < min_slots {
                    return None;
                }
                slots = room;
            }
        }
        if slots * SLOT_BYTES + self.arena + elen > self.capacity || self.arena + elen > POS_MASK as usize {
            return None;
        }
        Some(slots)
    }
}

/// The smallest capacity that admits `keys` distinct keys of `key_len` bytes (tests size maps
/// that hold an exact number of keys with it).
pub fn capacity_for(keys: usize, key_len: usize) -> usize {
    let elen = entry_len(key_len);
    let fits = |capacity: usize| {
        let mut b = Budget { capacity, ..Budget::default() };
        for _ in 0..keys {
            match b.admit(elen) {
                Some(s) => {
                    b.slots = s;
                    b.entries += 1;
                    b.arena += elen;
                }
                None => return false,
            }
        }
        true
    };
    let (mut lo, mut hi) = (0usize, keys * (elen + 4 * SLOT_BYTES) + 64);
    while !fits(hi) {
        hi *= 2;
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { hi = mid } else { lo = mid }
    }
    hi
}

#[derive(Debug)]
pub enum PutError {
    /// the offset is below the map's first offset or 2^48 or more above it
    OutOfRange(i64, i64),
}

/// The map itself, free of PyO3.
pub struct KeyMapCore {
    budget: Budget,
    slots: Vec<u64>,
    arena: Vec<u8>,
    base: Option<i64>,
    seed: u64,
    /// the last offset put, and whether every put so far had a higher offset than the one before
    last_put: Option<i64>,
    increasing: bool,
    /// `sorted_offsets`, kept until the next put
    winners: Option<Vec<i64>>,
}

#[inline(always)]
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[inline(always)]
fn hash(seed: u64, k: &[u8]) -> u64 {
    const M: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = seed ^ (k.len() as u64).wrapping_mul(M);
    let mut words = k.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().unwrap())).wrapping_mul(M);
        h ^= h >> 29;
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut t = [0u8; 8];
        t[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(t)).wrapping_mul(M);
    }
    mix(h)
}

/// The slot a hash starts probing at, among `n` (Lemire's multiply-shift: any table size).
#[inline(always)]
fn home(h: u64, n: usize) -> usize { ((h as u128 * n as u128) >> 64) as usize }

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_read(p: &u64) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch is a hint with no architectural effect (it never faults); `p` is a
    // valid reference anyway. SSE, which provides it, is part of x86_64's baseline.
    unsafe { _mm_prefetch(p as *const u64 as *const i8, _MM_HINT_T0) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn prefetch_read(_p: &u64) {}

#[inline(always)]
fn read_delta(a: &[u8], at: usize) -> i64 {
    let mut t = [0u8; 8];
    t[..DELTA_BYTES].copy_from_slice(&a[at..at + DELTA_BYTES]);
    i64::from_le_bytes(t) << 16 >> 16 // sign-extend the 48 bits
}

/// The key stored at arena position `at`, and where the entry ends.
#[inline(always)]
fn entry_key(a: &[u8], at: usize) -> (&[u8], usize) {
    let mut p = at + DELTA_BYTES;
    let mut len = 0usize;
    let mut shift = 0;
    loop {
        let c = a[p];
        p += 1;
        len |= ((c & 0x7f) as usize) << shift;
        if c & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (&a[p..p + len], p + len)
}

enum Probe {
    Found(usize),  // arena position
    Vacant(usize), // slot index
}

impl KeyMapCore {
    pub fn new(capacity: usize) -> Self {
        let seed = RandomState::new().build_hasher().finish();
        KeyMapCore { budget: Budget { capacity, ..Budget::default() }, slots: Vec::new(), arena: Vec::new(), base: None, seed,
                     last_put: None, increasing: true, winners: None }
    }

    pub fn len(&self) -> usize { self.budget.entries }
    pub fn is_empty(&self) -> bool { self.budget.entries == 0 }
    pub fn used_bytes(&self) -> usize { self.budget.used() }
    pub fn capacity(&self) -> usize { self.budget.capacity }
    pub fn slot_count(&self) -> usize { self.slots.len() }

    pub fn clear(&mut self) {
        self.budget = Budget { capacity: self.budget.capacity, ..Budget::default() };
        self.slots = Vec::new();
        self.arena = Vec::new();
        self.base = None;
        self.last_put = None;
        self.increasing = true;
        self.winners = None;
    }

    /// True while the offsets put so far were strictly increasing: then each key holds the
    /// highest offset put for it and no two mapped records share an offset, so a record put
    /// into the map is the latest of its key exactly when its offset is among `winners`.
    pub fn increasing(&self) -> bool { self.increasing }

    /// Say that a keyed record of the mapped range was not put (the pass stopped at it), so
    /// the map's offsets no longer name every latest record: `increasing` turns false for good
    /// (until `clear`), and the recopy looks keys up.
    pub fn forfeit_winners(&mut self) { self.increasing = false; }

    #[inline(always)]
    fn probe(&self, h: u64, key: &[u8]) -> Probe {
        let n = self.slots.len();
        let tag = h & TAG_MASK;
        let mut i = home(h, n);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return Probe::Vacant(i);
            }
            if s >> POS_BITS == tag {
                let at = (s & POS_MASK) as usize - 1;
                if entry_key(&self.arena, at).0 == key {
                    return Probe::Found(at);
                }
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// The latest offset of `key`, or -1.
    #[inline]
    pub fn get(&self, key: &[u8]) -> i64 {
        if self.budget.entries == 0 {
            return -1;
        }
        match self.probe(hash(self.seed, key), key) {
            Probe::Found(at) => self.base.unwrap_or(0) + read_delta(&self.arena, at),
            Probe::Vacant(_) => -1,
        }
    }

    fn delta(&mut self, offset: i64) -> Result<i64, PutError> {
        let base = *self.base.get_or_insert(offset);
        let d = offset as i128 - base as i128;
        if d < -(MAX_DELTA as i128) - 1 || d > MAX_DELTA as i128 {
            return Err(PutError::OutOfRange(offset, base));
        }
        Ok(d as i64)
    }

    /// The map's hash of `key` (for `put_hashed` and `prefetch`).
    #[inline(always)]
    pub fn hash_of(&self, key: &[u8]) -> u64 { hash(self.seed, key) }

    /// Ask the CPU to fetch the first slot `h` probes: the map's walks hash a few records
    /// ahead, so the slot's cache miss overlaps the work on the records before.
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        let n = self.slots.len();
        if n != 0 {
            prefetch_read(&self.slots[home(h, n)]);
        }
    }

    /// Map `key` to `offset`: Ok(false) when it is new and does not fit (nothing changed).
    #[inline]
    pub fn put(&mut self, key: &[u8], offset: i64) -> Result<bool, PutError> {
        let h = hash(self.seed, key);
        self.put_hashed(h, key, offset)
    }

    /// `put` with `h = hash_of(key)` computed by the caller. A refused put (full, or out of the
    /// 48-bit range) forfeits the winners shortcut: that record of the mapped range is missing.
    #[inline]
    pub fn put_hashed(&mut self, h: u64, key: &[u8], offset: i64) -> Result<bool, PutError> {
        let put = self.put_unchecked(h, key, offset);
        if !matches!(put, Ok(true)) {
            self.forfeit_winners();
        }
        put
    }

    #[inline(always)]
    fn put_unchecked(&mut self, h: u64, key: &[u8], offset: i64) -> Result<bool, PutError> {
        self.winners = None;
        let vacant = if self.slots.is_empty() {
            None
        } else {
            match self.probe(h, key) {
                Probe::Found(at) => {
                    let d = self.delta(offset)?;
                    self.arena[at..at + DELTA_BYTES].copy_from_slice(&d.to_le_bytes()[..DELTA_BYTES]);
                    self.note_put(offset);
                    return Ok(true);
                }
                Probe::Vacant(i) => Some(i),
            }
        };
        let elen = entry_len(key.len());
        let Some(slots) = self.budget.admit(elen) else { return Ok(false) };
        let d = self.delta(offset)?;
        let i = match vacant {
            Some(i) if slots == self.slots.len() => i,
            _ => {
                self.rehash(slots);
                self.vacant_slot(h)
            }
        };
        let at = self.arena.len();
        if at + elen > self.arena.capacity() {
            // grow within the budget: never reserve more than the budget leaves the arena
            let room = self.budget.capacity - slots * SLOT_BYTES;
            let want = (self.arena.capacity() * 2).max(4096).min(room).max(at + elen);
            self.arena.reserve_exact(want - at);
        }
        self.arena.extend_from_slice(&d.to_le_bytes()[..DELTA_BYTES]);
        let mut v = key.len();
        while v >= 0x80 {
            self.arena.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.arena.push(v as u8);
        self.arena.extend_from_slice(key);
        self.slots[i] = ((h & TAG_MASK) << POS_BITS) | (at as u64 + 1);
        self.budget.slots = slots;
        self.budget.entries += 1;
        self.budget.arena += elen;
        self.note_put(offset);
        Ok(true)
    }

    #[inline(always)]
    fn note_put(&mut self, offset: i64) {
        if let Some(last) = self.last_put {
            if offset <= last {
                self.increasing = false;
            }
        }
        self.last_put = Some(offset);
    }

    /// The first empty slot of `h`'s probe sequence (the key is known to be absent).
    #[inline(always)]
    fn vacant_slot(&self, h: u64) -> usize {
        let n = self.slots.len();
        let mut i = home(h, n);
        while self.slots[i] != 0 {
            i += 1;
            if i == n {
                i = 0;
            }
        }
        i
    }

    /// Rebuild the slot table with `n` slots from the arena, whose entries are the keys. The
    /// keys are hashed `REHASH_AHEAD` entries before they are placed, each one's home slot
    /// prefetched meanwhile (a growing table's slots are cache misses: this was a fifth of a
    /// map build of a million distinct keys); they are placed in arena order all the same, so
    /// the table is the one a plain loop builds.
    fn rehash(&mut self, n: usize) {
        const REHASH_AHEAD: usize = 16;
        self.slots = vec![0u64; n];
        let mut ring = [(0u64, 0usize); REHASH_AHEAD];
        let (mut head, mut queued) = (0usize, 0usize);
        let mut at = 0;
        while at < self.arena.len() {
            let (key, next) = entry_key(&self.arena, at);
            let h = hash(self.seed, key);
            self.prefetch(h);
            if queued == REHASH_AHEAD {
                let (oh, oat) = ring[head];
                self.place(oh, oat);
            } else {
                queued += 1;
            }
            ring[head] = (h, at);
            head = (head + 1) % REHASH_AHEAD;
            at = next;
        }
        let first = (head + REHASH_AHEAD - queued) % REHASH_AHEAD;
        for k in 0..queued {
            let (h, at) = ring[(first + k) % REHASH_AHEAD];
            self.place(h, at);
        }
    }

    /// Put the arena entry at `at`, of hash `h`, in its first vacant slot.
    #[inline(always)]
    fn place(&mut self, h: u64, at: usize) {
        let i = self.vacant_slot(h);
        self.slots[i] = ((h & TAG_MASK) << POS_BITS) | (at as u64 + 1);
    }

    /// Every mapped offset, ascending, computed once per state of the map.
    pub fn winners(&mut self) -> &[i64] {
        if self.winners.is_none() {
            self.winners = Some(self.sorted_offsets());
        }
        self.winners.as_deref().unwrap_or(&[])
    }

    /// The offset deltas are relative to this.
    pub fn base_offset(&self) -> i64 { self.base.unwrap_or(0) }

    /// `f(key, offset delta)` for every entry, in first-put order; stops at `f`'s first error.
    pub fn for_each<E, F: FnMut(&[u8], i64) -> Result<(), E>>(&self, mut f: F) -> Result<(), E> {
        let mut at = 0;
        while at < self.arena.len() {
            let (key, next) = entry_key(&self.arena, at);
            f(key, read_delta(&self.arena, at))?;
            at = next;
        }
        Ok(())
    }

    /// `winners` as last computed (None when a put came since).
    pub fn cached_winners(&self) -> Option<&[i64]> { self.winners.as_deref() }

    /// Is any mapped offset within `lo..=hi`?
    pub fn has_winner_in(&mut self, lo: i64, hi: i64) -> bool {
        let w = self.winners();
        let i = w.partition_point(|&x| x < lo);
        i < w.len() && w[i] <= hi
    }

    /// Every mapped offset, ascending.
    pub fn sorted_offsets(&self) -> Vec<i64> {
        let base = self.base.unwrap_or(0);
        let mut out = Vec::with_capacity(self.budget.entries);
        let mut at = 0;
        while at < self.arena.len() {
            out.push(base + read_delta(&self.arena, at));
            at = entry_key(&self.arena, at).1;
        }
        out.sort_unstable();
        out
    }
}

/// The map file layout of `storage_engine/cleaner/map_file.py` (which defines it): `LPKM1`, the
/// entry count (big-endian u64), each key's length (u32), each offset (i64), the keys back to
/// back; lengths and offsets in the machine's order, as Python's `array` writes them. Both
/// cores write and read the same files, so a job's tasks may run either.
pub const MAP_MAGIC: &[u8] = b"LPKM1";
const MAP_HEAD: usize = 5 + 8;

/// A map file checked as strictly as `map_file.decode_map` checks it: the magic, the count's
/// lengths and offsets within the bytes, and the keys adding up to exactly the rest. Nothing
/// is sized from the count before it is checked against the bytes.
pub struct MapFile<'a> {
    count: usize,
    data: &'a [u8],
}

impl<'a> MapFile<'a> {
    pub fn parse(data: &'a [u8]) -> batch::Res<Self> {
        if data.len() < MAP_HEAD || &data[..MAP_MAGIC.len()] != MAP_MAGIC {
            return Err(batch::Corrupt("not a key map file".into()));
        }
        let count = u64::from_be_bytes(data[5..MAP_HEAD].try_into().unwrap());
        let end_offsets = count.checked_mul(12).and_then(|n| n.checked_add(MAP_HEAD as u64));
        let Some(end_offsets) = end_offsets.filter(|&e| e <= data.len() as u64) else {
            return Err(batch::Corrupt(format!("key map file cut short ({count} entries announced)")));
        };
        let count = count as usize; // <= data.len() / 12 now
        let mut keys = 0u64;
        for i in 0..count {
            keys += u64::from(Self::u32_at(data, MAP_HEAD + 4 * i));
        }
        if end_offsets + keys != data.len() as u64 {
            return Err(batch::Corrupt("key map file: its keys do not add up to its size".into()));
        }
        Ok(MapFile { count, data })
    }

    fn u32_at(d: &[u8], at: usize) -> u32 { u32::from_ne_bytes(d[at..at + 4].try_into().unwrap()) }

    /// `f(key, offset)` for every entry, in the file's order (every slice was bounds-checked
    /// by `parse`: the lengths add up to the keys' bytes).
    pub fn for_each<E, F: FnMut(&'a [u8], i64) -> Result<(), E>>(&self, mut f: F) -> Result<(), E> {
        let d = self.data;
        let offsets = MAP_HEAD + 4 * self.count;
        let mut key_at = offsets + 8 * self.count;
        for i in 0..self.count {
            let len = Self::u32_at(d, MAP_HEAD + 4 * i) as usize;
            let off = i64::from_ne_bytes(d[offsets + 8 * i..offsets + 8 * i + 8].try_into().unwrap());
            f(&d[key_at..key_at + len], off)?;
            key_at += len;
        }
        Ok(())
    }
}

impl KeyMapCore {
    /// Grow the slot table at once for up to `more` new keys, when the budget has room for it
    /// (a merge of map files: no doubling and rehashing as they load).
    fn reserve(&mut self, more: usize) {
        let want = ((self.len() + more) as f64 / SLOT_LOAD).ceil() as usize;
        if want > self.slots.len() && want * SLOT_BYTES + self.budget.arena <= self.budget.capacity {
            self.rehash(want);
            self.budget.slots = want;
        }
    }

    /// The map as a map file (entries in first-put order, as `to_dict` gives them).
    pub fn to_map_file(&self) -> Vec<u8> {
        let n = self.len();
        let keys = self.budget.arena - n * DELTA_BYTES; // arena minus deltas: lengths' varints + keys
        let mut out = Vec::with_capacity(MAP_HEAD + 12 * n + keys);
        out.extend_from_slice(MAP_MAGIC);
        out.extend_from_slice(&(n as u64).to_be_bytes());
        let mut offsets = Vec::with_capacity(8 * n);
        let base = self.base_offset();
        let _ = self.for_each(|key, delta| -> Result<(), ()> {
            out.extend_from_slice(&(key.len() as u32).to_ne_bytes());
            offsets.extend_from_slice(&(base + delta).to_ne_bytes());
            Ok(())
        });
        out.extend_from_slice(&offsets);
        let _ = self.for_each(|key, _| -> Result<(), ()> {
            out.extend_from_slice(key);
            Ok(())
        });
        out
    }

    /// Put every entry of a parsed map file, in its order (a later file's offsets replace an
    /// earlier one's: the merge of span maps); Ok(false) when a new key did not fit. An offset
    /// the map cannot hold (48-bit deltas) is refused before anything goes in.
    pub fn put_map_file(&mut self, file: &MapFile<'_>) -> Result<bool, PutError> {
        let mut base = self.base;
        file.for_each(|_, off| {
            let b = *base.get_or_insert(off);
            let d = off as i128 - b as i128;
            if d < -(MAX_DELTA as i128) - 1 || d > MAX_DELTA as i128 {
                return Err(PutError::OutOfRange(off, b));
            }
            Ok(())
        })?;
        self.reserve(file.count);
        // hash every key first and prefetch each one's slot a few entries ahead of its put
        let mut hashes = Vec::with_capacity(file.count); // checked against the bytes by `parse`
        let _ = file.for_each(|key, _| -> Result<(), ()> {
            hashes.push(self.hash_of(key));
            Ok(())
        });
        let mut i = 0;
        let r = file.for_each(|key, off| {
            if let Some(&h) = hashes.get(i + 8) {
                self.prefetch(h);
            }
            i += 1;
            match self.put_hashed(hashes[i - 1], key, off) {
                Ok(true) => Ok(()),
                Ok(false) => Err(None),
                Err(e) => Err(Some(e)),
            }
        });
        match r {
            Ok(()) => Ok(true),
            Err(None) => Ok(false),
            Err(Some(e)) => Err(e),
        }
    }
}

impl From<PutError> for PyErr {
    fn from(e: PutError) -> PyErr {
        match e {
            PutError::OutOfRange(offset, base) => PyOverflowError::new_err(format!(
                "offset {offset} cannot go into the key map: it holds offsets {}..{} (signed 48-bit deltas from \
                 its first offset {base})", base.saturating_sub(MAX_DELTA + 1), base.saturating_add(MAX_DELTA))),
        }
    }
}

/// `KeyMap(capacity_bytes)`: the compiled map behind `OffsetMap`'s default layout
/// (storage_engine/cleaner/offset_map.py), which keeps the Python-facing API and the facts.
#[pyclass(module = "storage_engine.native._core")]
pub struct KeyMap {
    pub core: KeyMapCore,
}

#[pymethods]
impl KeyMap {
    #[new]
    fn new(capacity_bytes: usize) -> PyResult<Self> {
        if capacity_bytes == 0 {
            return Err(PyValueError::new_err("a key map needs a positive byte budget"));
        }
        Ok(KeyMap { core: KeyMapCore::new(capacity_bytes) })
    }

    /// Map `key` to `offset`; False when a new key does not fit, or the offset is beyond the
    /// map's 48-bit range from its first (nothing changed then: the caller's pass ends here, as
    /// when the map is full, and the next pass starts a map from this offset).
    fn put(&mut self, key: &[u8], offset: i64) -> PyResult<bool> {
        match self.core.put(key, offset) {
            Ok(put) => Ok(put),
            Err(PutError::OutOfRange(..)) => Ok(false),
        }
    }

    /// The mapped offset of `key`, -1 when unmapped.
    fn get(&self, key: &[u8]) -> i64 { self.core.get(key) }

    fn __len__(&self) -> usize { self.core.len() }

    /// Slot table + arena bytes: what the map costs.
    #[getter]
    fn used_bytes(&self) -> usize { self.core.used_bytes() }

    #[getter]
    fn capacity_bytes(&self) -> usize { self.core.capacity() }

    #[getter]
    fn slots(&self) -> usize { self.core.slot_count() }

    fn clear(&mut self) { self.core.clear() }

    /// Every mapped offset, ascending (`OffsetMap.sorted_offsets`).
    fn sorted_offsets<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let core = &mut self.core;
        let v = py.allow_threads(|| core.winners().to_vec());
        PyList::new(py, v)
    }

    /// Put every `key -> offset` of a dict (a table built elsewhere: the Spark job's merged span
    /// maps), in the dict's order; False if one did not fit.
    fn put_dict(&mut self, table: &Bound<'_, PyDict>) -> PyResult<bool> {
        for (k, v) in table.iter() {
            let key = k.downcast::<PyBytes>()?;
            if !self.core.put(key.as_bytes(), v.extract::<i64>()?)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The map as a dict of key -> offset (in first-put order).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let base = self.core.base_offset();
        self.core.for_each(|key, delta| d.set_item(PyBytes::new(py, key), base + delta))?;
        Ok(d)
    }

    /// The map as the bytes of a map file (`storage_engine/cleaner/map_file.py`'s layout).
    fn to_map_file<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let core = &self.core;
        let v = py.allow_threads(|| core.to_map_file());
        PyBytes::new(py, &v)
    }

    /// Put every entry of a map file's bytes, in its order (merging span maps: later files'
    /// offsets replace earlier ones'); False if a new key did not fit. Raises `CorruptBatch`,
    /// before changing anything, for bytes `map_file.decode_map` refuses.
    fn put_map_file(&mut self, py: Python<'_>, data: Buf) -> PyResult<bool> {
        let b = view(&data)?;
        let core = &mut self.core;
        py.allow_threads(|| -> PyResult<bool> {
            let file = MapFile::parse(b)?;
            Ok(core.put_map_file(&file)?)
        })
    }

    /// Whether a mapped offset lies within `lo..=hi` (the recopy skips a batch without one).
    fn has_winner_in(&mut self, lo: i64, hi: i64) -> bool { self.core.has_winner_in(lo, hi) }

    /// Whether every put so far had a higher offset than the one before.
    #[getter]
    fn increasing(&self) -> bool { self.core.increasing() }

    /// Arena bytes of one entry for a key of `key_len` bytes.
    #[staticmethod]
    fn entry_bytes(key_len: usize) -> usize { entry_len(key_len) }

    /// The smallest budget that holds `keys` distinct keys of `key_len` bytes.
    #[staticmethod]
    fn capacity_for(keys: usize, key_len: usize) -> usize { capacity_for(keys, key_len) }
}
