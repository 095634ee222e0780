//! The cleaner's per-record loops over one v2 batch (storage_engine/cleaner/record_decisions.py's
//! `map_v2_records` and `filter_v2_records`) over the compiled `KeyMap`.
//!
//! The keep/drop rules are defined once, in storage_engine/cleaner/rules.py (`retain_record`,
//! Kafka's `shouldRetainRecord`); `filter` below implements exactly them, and the property and
//! differential tests hold it to the reference. Both loops first walk the whole batch
//! (`batch::walk_spans`, accepting exactly what `walk_records` accepts), as the reference does,
//! so malformed bytes are refused before the map changes. The walks run without the GIL.
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::batch::{self, Span};
use crate::buffers::{view, Buf};
use crate::keymap::{KeyMap, KeyMapCore, PutError};

/// How many records ahead the walks prefetch a key's slot.
const PREFETCH_AHEAD: usize = 8;

pub struct MapOutcome {
    pub complete: bool,
    pub new_keys: usize,
    pub last: i64,
    pub unkeyed: usize,
}

/// A record offset beyond int64: only a damaged batch's (its base offset is outside the CRC).
/// Refused, so the reference re-reads the batch; as its Python ints hold such offsets, the
/// caller then reports a `CoreDivergenceError` naming the batch rather than clean with offsets
/// Kafka cannot have.
fn offset_overflow(base_offset: i64, s: &Span) -> batch::Corrupt {
    batch::Corrupt(format!("offset {base_offset} + {} is beyond int64", s.offset_delta))
}

/// `map_v2_records`: put every keyed record at or above `min_offset`, stopping at the first new
/// key that does not fit.
pub fn map_spans(km: &mut KeyMapCore, b: &[u8], spans: &[Span], base_offset: i64, min_offset: i64)
                 -> batch::Res<MapOutcome> {
    let check_min = base_offset < min_offset;
    let mut out = MapOutcome { complete: true, new_keys: 0, last: -1, unkeyed: 0 };
    // hash every key first and prefetch each one's slot a few records ahead of its put
    let hashes: Vec<u64> = spans.iter().map(|s| s.key.map_or(0, |(at, len)| km.hash_of(&b[at..at + len]))).collect();
    for (i, s) in spans.iter().enumerate() {
        if let Some(&h) = hashes.get(i + PREFETCH_AHEAD) {
            km.prefetch(h);
        }
        let Some((at, len)) = s.key else {
            out.unkeyed += 1;
            continue;
        };
        let Some(off) = base_offset.checked_add(s.offset_delta) else {
            return Err(offset_overflow(base_offset, s));
        };
        if check_min && off < min_offset {
            continue;
        }
        let before = km.len();
        let put = match km.put_hashed(hashes[i], &b[at..at + len], off) {
            Ok(put) => put,
            // further from the map's first offset than its 48-bit deltas reach: the pass ends
            // here as when the map is full, and the next starts a map from this offset
            Err(PutError::OutOfRange(..)) => false,
        };
        if !put {
            out.complete = false;
            return Ok(out);
        }
        out.new_keys += km.len() - before;
        out.last = off;
    }
    Ok(out)
}

pub struct FilterOutcome {
    pub kept: Vec<(usize, usize, i64)>,
    pub has_tombstone: bool,
    pub duplicates: usize,
    pub tombstones: usize,
    pub unkeyed: usize,
}

/// Is `off` in the ascending `w`? `j` is a cursor kept between calls (offsets mostly rise).
#[inline(always)]
fn member(w: &[i64], j: &mut usize, off: i64) -> bool {
    if *j > w.len() || (*j > 0 && w[*j - 1] >= off) {
        *j = w.partition_point(|&x| x < off);
    } else {
        while *j < w.len() && w[*j] < off {
            *j += 1;
            if *j + 64 < w.len() && w[*j + 64] < off {
                *j = *j + 64 + w[*j + 64..].partition_point(|&x| x < off);
                break;
            }
        }
    }
    *j < w.len() && w[*j] == off
}

/// `filter_v2_records`: `retain_record` for every record. `winners` (the map's offsets,
/// ascending) may be given when the map's puts were strictly increasing: a record at or above
/// `dirty_start` (the mapped dirty range, every keyed record of which was put) is then the
/// latest of its key exactly when its offset is a winner, so no key is looked up for it. A
/// record below (the clean section) is looked up: `off < get(key)` is a duplicate.
#[allow(clippy::too_many_arguments)]
pub fn filter_spans(km: &KeyMapCore, winners: Option<&[i64]>, dirty_start: i64, b: &[u8], spans: &[Span],
                    base_offset: i64, map_latest_offset: i64, retain_tombstones: bool) -> batch::Res<FilterOutcome> {
    let mut out = FilterOutcome { kept: Vec::with_capacity(spans.len()), has_tombstone: false, duplicates: 0,
                                  tombstones: 0, unkeyed: 0 };
    let mut j = 0usize;
    for s in spans {
        let Some(off) = base_offset.checked_add(s.offset_delta) else {
            return Err(offset_overflow(base_offset, s));
        };
        if off <= map_latest_offset {
            match s.key {
                None => {
                    out.unkeyed += 1;
                    continue;
                }
                Some((at, len)) => {
                    let duplicate = match winners {
                        Some(w) if off >= dirty_start => !member(w, &mut j, off),
                        _ => off < km.get(&b[at..at + len]),
                    };
                    if duplicate {
                        out.duplicates += 1;
                        continue;
                    }
                    if s.tombstone && !retain_tombstones {
                        out.tombstones += 1;
                        continue;
                    }
                }
            }
        }
        out.has_tombstone |= s.tombstone;
        out.kept.push((s.start, s.end, s.timestamp_delta));
    }
    Ok(out)
}


/// `map_v2_records(keymap, buf, start, stop, count, base_offset, min_offset)` ->
/// `(complete, new_keys, last_offset_put, unkeyed)`; raises `CorruptBatch` for bytes
/// `walk_records` refuses, OverflowError for an offset the map cannot hold.
#[pyfunction]
#[pyo3(signature = (keymap, buf, start, stop, count, base_offset, min_offset))]
#[allow(clippy::too_many_arguments)]
pub fn map_v2_records(py: Python<'_>, keymap: &Bound<'_, KeyMap>, buf: Buf, start: usize, stop: usize, count: i64,
                      base_offset: i64, min_offset: i64) -> PyResult<(bool, usize, i64, usize)> {
    let b = view(&buf)?;
    let mut km = keymap.borrow_mut();
    let core = &mut km.core;
    let r = py.allow_threads(|| -> PyResult<MapOutcome> {
        let spans = batch::walk_spans(b, count, start, stop)?;
        Ok(map_spans(core, b, &spans, base_offset, min_offset)?)
    })?;
    Ok((r.complete, r.new_keys, r.last, r.unkeyed))
}

/// `latest_offsets(keymap, buf, start, stop, count, base_offset, lo, hi)`: put every keyed
/// record with `lo <= offset < hi` (`dirty_scan.segment_latest_offsets`' walk over one batch,
/// no budget: the map is unbounded); raises `CorruptBatch` as `map_v2_records` does.
#[pyfunction]
#[pyo3(signature = (keymap, buf, start, stop, count, base_offset, lo, hi))]
#[allow(clippy::too_many_arguments)]
pub fn latest_offsets(py: Python<'_>, keymap: &Bound<'_, KeyMap>, buf: Buf, start: usize, stop: usize, count: i64,
                      base_offset: i64, lo: i64, hi: i64) -> PyResult<()> {
    let b = view(&buf)?;
    let mut km = keymap.borrow_mut();
    let core = &mut km.core;
    py.allow_threads(|| -> PyResult<()> {
        let spans = batch::walk_spans(b, count, start, stop)?;
        for s in &spans {
            let Some(off) = base_offset.checked_add(s.offset_delta) else {
                return Err(offset_overflow(base_offset, s).into());
            };
            if let Some((at, len)) = s.key {
                if lo <= off && off < hi && !core.put(&b[at..at + len], off)? {
                    return Err(pyo3::exceptions::PyMemoryError::new_err("the key map's budget is full"));
                }
            }
        }
        Ok(())
    })
}

/// `(kept spans or None, a kept record is a tombstone, duplicates, tombstones, unkeyed)`
type Filtered<'py> = (Option<Bound<'py, PyList>>, bool, usize, usize, usize);

/// `filter_v2_records(keymap, buf, start, stop, count, base_offset, map_latest_offset,
/// retain_tombstones, dirty_start=None)` -> `(kept [(start, end, timestamp delta)], a kept
/// record is a tombstone, duplicates, tombstones, unkeyed)`. `dirty_start`: the first offset of
/// the dirty range the map was built from, when every keyed record from there on up to the
/// map's latest offset was put into it (the cleaner's map building); None looks every key up.
/// `all_kept_as_none`: return None for `kept` when every record survives (the caller copies
/// the batch as it is and needs no list; building it is a third of the walk's time then).
#[pyfunction]
#[pyo3(signature = (keymap, buf, start, stop, count, base_offset, map_latest_offset, retain_tombstones,
                    dirty_start=None, all_kept_as_none=false))]
#[allow(clippy::too_many_arguments)]
pub fn filter_v2_records<'py>(py: Python<'py>, keymap: &Bound<'py, KeyMap>, buf: Buf, start: usize, stop: usize,
                              count: i64, base_offset: i64, map_latest_offset: i64, retain_tombstones: bool,
                              dirty_start: Option<i64>, all_kept_as_none: bool)
                              -> PyResult<Filtered<'py>> {
    let b = view(&buf)?;
    let mut km = keymap.borrow_mut();
    let core = &mut km.core;
    let r = py.allow_threads(|| -> batch::Res<FilterOutcome> {
        let spans = batch::walk_spans(b, count, start, stop)?;
        let use_winners = dirty_start.is_some() && core.increasing();
        if use_winners {
            core.winners();
        }
        let core = &*core;
        let winners = if use_winners { core.cached_winners() } else { None };
        filter_spans(core, winners, dirty_start.unwrap_or(i64::MAX), b, &spans, base_offset, map_latest_offset,
                     retain_tombstones)
    })?;
    if all_kept_as_none && r.kept.len() as i64 == count {
        return Ok((None, r.has_tombstone, r.duplicates, r.tombstones, r.unkeyed));
    }
    let kept = PyList::empty(py);
    for (s, e, t) in r.kept {
        kept.append(PyTuple::new(py, [s as i64, e as i64, t])?)?;
    }
    Ok((Some(kept), r.has_tombstone, r.duplicates, r.tombstones, r.unkeyed))
}
