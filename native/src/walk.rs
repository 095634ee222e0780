//! The compaction's and the append's record walks: compiled twins of
//! `storage_engine.record.v2.walk_records` and `timestamp_deltas`.
//!
//! `walk_records` is `batch::walk_spans` (which the cleaner's compiled loops share) with Python
//! tuples around it. These two do *not* share `batch::record`'s checks: they mirror their reference loops exactly,
//! which are looser than the decoder (Kafka's `skipKeyValueIterator` reads only what the broker
//! needs): a record must be at least 6 bytes and end within the walked range, the walk must end
//! exactly at `end`, `walk_records` rejects a key length below -1 and a record that "ends inside
//! its key", and varints are read against the whole buffer (a varint may run past its record
//! where the reference lets it). Anything rejected here is re-read by the reference, whose
//! `IndexError`/`VarintError`/`ValueError` (class and message) is the one raised.
use pyo3::prelude::*;
use pyo3::ffi;
use pyo3::types::{PyBytes, PyList};

use crate::batch::{self, varint, Corrupt, Res};
use crate::corrupt;

/// The record length varint at `pos` and where the record's body starts.
#[inline(always)]
fn length(b: &[u8], pos: usize) -> Res<(i64, usize)> {
    let mut p = pos;
    let l = varint(b, &mut p, b.len(), 5)?;
    Ok((l, p))
}

fn deltas(b: &[u8], count: i64, start: usize, n: usize) -> Res<(Vec<i64>, usize)> {
    let mut out = Vec::with_capacity((count.max(0) as usize).min((n.saturating_sub(start)) / 7 + 1));
    let (mut pos, mut last) = (start, start);
    for _ in 0..count.max(0) {
        let (len, p) = length(b, pos)?;
        if p as i64 + len > n as i64 || len < 6 { corrupt!("record length {len} at {pos} runs past the batch"); }
        let mut q = p + 1; // after the attributes byte
        out.push(varint(b, &mut q, b.len(), 10)?);
        last = pos;
        pos = p + len as usize;
    }
    if pos != n { corrupt!("{} bytes after the declared {count} records", n as i64 - pos as i64); }
    Ok((out, last))
}

/// `walk_records(buf, count, start, end)`: `(start, end, offset_delta, timestamp_delta, key,
/// is_tombstone)` of every record in `buf[start:end]` (the caller guarantees
/// `0 <= start`, `end <= len(buf)`).
#[pyfunction]
pub fn walk_records<'py>(py: Python<'py>, buf: &Bound<'py, PyBytes>, count: i64, start: usize, end: usize)
                         -> PyResult<Bound<'py, PyList>> {
    let b = buf.as_bytes();
    if end > b.len() { return Err(Corrupt(format!("end {end} past the buffer")).into()); }
    let found = py.allow_threads(|| batch::walk_spans(b, count, start, end))?;
    // Built through the C API: a list of 1,000 six-tuples through PyO3's generic conversions
    // cost twice the walk itself.
    unsafe {
        let list = ffi::PyList_New(found.len() as ffi::Py_ssize_t);
        let list = Bound::from_owned_ptr_or_err(py, list)?.downcast_into_unchecked::<PyList>();
        for (i, s) in found.iter().enumerate() {
            let key = match s.key {
                Some((at, l)) => ffi::PyBytes_FromStringAndSize(b[at..at + l].as_ptr() as *const _, l as ffi::Py_ssize_t),
                None => {
                    ffi::Py_INCREF(ffi::Py_None());
                    ffi::Py_None()
                }
            };
            let tomb = if s.tombstone { ffi::Py_True() } else { ffi::Py_False() };
            ffi::Py_INCREF(tomb);
            let items = [
                ffi::PyLong_FromSize_t(s.start),
                ffi::PyLong_FromSize_t(s.end),
                ffi::PyLong_FromLongLong(s.offset_delta),
                ffi::PyLong_FromLongLong(s.timestamp_delta),
                key,
                tomb,
            ];
            let t = ffi::PyTuple_New(6);
            if t.is_null() || items.iter().any(|o| o.is_null()) {
                for o in items.iter().filter(|o| !o.is_null()) { ffi::Py_DECREF(*o); }
                if !t.is_null() { ffi::Py_DECREF(t); }
                return Err(PyErr::fetch(py));
            }
            for (j, o) in items.into_iter().enumerate() { ffi::PyTuple_SET_ITEM(t, j as ffi::Py_ssize_t, o); }
            ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, t);
        }
        Ok(list)
    }
}

/// `timestamp_deltas(buf, count, start, end)`: every record's timestamp delta and where the last
/// record starts.
#[pyfunction]
pub fn timestamp_deltas<'py>(py: Python<'py>, buf: &Bound<'py, PyBytes>, count: i64, start: usize, end: usize)
                             -> PyResult<(Bound<'py, PyList>, usize)> {
    let b = buf.as_bytes();
    if end > b.len() { return Err(Corrupt(format!("end {end} past the buffer")).into()); }
    let (out, last) = py.allow_threads(|| deltas(b, count, start, end))?;
    Ok((PyList::new(py, out)?, last))
}
