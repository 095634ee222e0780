//! Records to v2 batch bytes: the compiled twin of `encode_batch`
//! (storage_engine/record/v2_builder.py), and the batch sealing (header + CRC-32C) that
//! `rebuild` shares.
//!
//! The reference defines every rule and every error. This side encodes exactly the inputs it
//! understands (a list or tuple of `Record` objects, or objects with the same attributes, whose
//! fields are ints, bytes, None and tuples of (str, bytes | None) headers) and returns None, "run
//! the reference", for anything else: a value out of range, offsets that do not increase,
//! unknown field types. The reference then raises its own error (or, for a type this side does
//! not take, such as a bytearray value, writes the batch itself), so no input gives bytes here
//! that the reference refuses, and no message is defined twice.
//!
//! `Record` is a slotted dataclass: its fields are read straight from its slots (the offsets its
//! member descriptors give, as `records` writes them); other objects through `getattr`.
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple, PyType};

use crate::records::slot_offsets;

/// The most the encoder reserves ahead of the records it has seen (see `encode`).
const RESERVE_CAP: usize = 64 << 20;

pub const HEADER_SIZE: usize = crate::batch::HEADER_SIZE;
const ATTRIBUTES_OFFSET: usize = 21;

/// The reference would raise, or this side does not take the input: run the reference.
pub struct Decline;
pub type Enc<T> = Result<T, Decline>;

// --------------------------------------------------------------------------------------------
// bytes

/// Zigzag varint of an int32 (`encode_varint`); values outside int32 are the reference's error.
#[inline(always)]
pub fn put_varint(out: &mut Vec<u8>, v: i64) -> Enc<()> {
    if v < i32::MIN as i64 || v > i32::MAX as i64 { return Err(Decline); }
    let v = v as i32;
    put_leb128(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
    Ok(())
}

/// Zigzag varlong of an int64 (`encode_varlong`).
#[inline(always)]
pub fn put_varlong(out: &mut Vec<u8>, v: i128) -> Enc<()> {
    if v < i64::MIN as i128 || v > i64::MAX as i128 { return Err(Decline); }
    let v = v as i64;
    put_leb128(out, ((v << 1) ^ (v >> 63)) as u64);
    Ok(())
}

#[inline(always)]
fn put_leb128(out: &mut Vec<u8>, mut u: u64) {
    while u > 0x7f {
        out.push((u as u8 & 0x7f) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

#[inline(always)]
fn varint_size(v: i32) -> usize { leb128_size(((v << 1) ^ (v >> 31)) as u32 as u64) }

#[inline(always)]
fn varlong_size(v: i64) -> usize { leb128_size(((v << 1) ^ (v >> 63)) as u64) }

#[inline(always)]
fn leb128_size(u: u64) -> usize { (64 - (u | 1).leading_zeros() as usize).div_ceil(7) }

/// A v2 batch header's fields (Kafka's `DefaultRecordBatch`), as `assemble_batch` takes them.
pub struct Sealing {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

/// `assemble_batch` over `out` = 61 placeholder bytes + the records: the header written in
/// place, the CRC-32C over everything from the attributes on. A batch whose length does not fit
/// batchLength is the reference's error.
pub fn seal(out: &mut [u8], s: &Sealing) -> Enc<()> {
    let length = out.len() - 12;
    if length > i32::MAX as usize { return Err(Decline); }
    out[0..8].copy_from_slice(&s.base_offset.to_be_bytes());
    out[8..12].copy_from_slice(&(length as i32).to_be_bytes());
    out[12..16].copy_from_slice(&s.partition_leader_epoch.to_be_bytes());
    out[16] = 2;
    out[21..23].copy_from_slice(&s.attributes.to_be_bytes());
    out[23..27].copy_from_slice(&s.last_offset_delta.to_be_bytes());
    out[27..35].copy_from_slice(&s.base_timestamp.to_be_bytes());
    out[35..43].copy_from_slice(&s.max_timestamp.to_be_bytes());
    out[43..51].copy_from_slice(&s.producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&s.producer_epoch.to_be_bytes());
    out[53..57].copy_from_slice(&s.base_sequence.to_be_bytes());
    out[57..61].copy_from_slice(&s.records_count.to_be_bytes());
    let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

// --------------------------------------------------------------------------------------------
// Python values

/// An exact int or a bool that fits i64 (an int subclass may compare or subtract its own way:
/// the reference runs for it).
#[inline(always)]
unsafe fn int64(o: *mut ffi::PyObject) -> Enc<i64> {
    if o.is_null() || (ffi::PyLong_CheckExact(o) == 0 && ffi::PyBool_Check(o) == 0) { return Err(Decline); }
    let v = ffi::PyLong_AsLongLong(o);
    if v == -1 && !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
        return Err(Decline);
    }
    Ok(v)
}

fn opt_int64(o: &Bound<'_, PyAny>) -> Enc<Option<i64>> {
    if o.is_none() { Ok(None) } else { unsafe { int64(o.as_ptr()).map(Some) } }
}

fn int_in(o: &Bound<'_, PyAny>, lo: i64, hi: i64) -> Enc<i64> {
    let v = unsafe { int64(o.as_ptr())? };
    if v < lo || v > hi { Err(Decline) } else { Ok(v) }
}

/// The contents of an exact `bytes` object, or None for `None`; anything else is declined.
#[inline(always)]
unsafe fn blob<'a>(o: *mut ffi::PyObject) -> Enc<Option<&'a [u8]>> {
    if o == ffi::Py_None() { return Ok(None); }
    if o.is_null() || ffi::PyBytes_CheckExact(o) == 0 { return Err(Decline); }
    let b = o as *mut ffi::PyBytesObject; // the object's own bytes, as PyBytes_AS_STRING reads them
    Ok(Some(std::slice::from_raw_parts((*b).ob_sval.as_ptr() as *const u8, ffi::Py_SIZE(o) as usize)))
}

/// A record's five fields (offset, timestamp, key, value, headers), borrowed from its slots or
/// owned from `getattr`.
struct Fields {
    f: [*mut ffi::PyObject; 5],
    owned: bool,
}

impl Drop for Fields {
    fn drop(&mut self) {
        if self.owned {
            for &o in &self.f {
                if !o.is_null() { unsafe { ffi::Py_DECREF(o) } }
            }
        }
    }
}

/// How the records' fields are read: slots of the exact `Record` type, attributes otherwise.
struct Reader<'py> {
    record_type: *mut ffi::PyTypeObject,
    slots: [usize; 5],
    names: [Bound<'py, PyAny>; 5],
}

impl<'py> Reader<'py> {
    fn new(py: Python<'py>, record_type: &Bound<'py, PyType>) -> PyResult<Self> {
        let names = ["offset", "timestamp", "key", "value", "headers"].map(|n| pyo3::types::PyString::intern(py, n).into_any());
        Ok(Reader { record_type: record_type.as_type_ptr(), slots: slot_offsets(record_type)?, names })
    }

    #[inline(always)]
    unsafe fn fields(&self, r: *mut ffi::PyObject) -> Enc<Fields> {
        if ffi::Py_TYPE(r) == self.record_type {
            let f = self.slots.map(|off| *((r as *mut u8).add(off) as *mut *mut ffi::PyObject));
            if f.iter().any(|o| o.is_null()) { return Err(Decline); }
            return Ok(Fields { f, owned: false });
        }
        let mut out = Fields { f: [std::ptr::null_mut(); 5], owned: true };
        for (i, n) in self.names.iter().enumerate() {
            let o = ffi::PyObject_GetAttr(r, n.as_ptr());
            if o.is_null() {
                ffi::PyErr_Clear();
                return Err(Decline);
            }
            out.f[i] = o;
        }
        Ok(out)
    }
}

/// The items of an exact list or tuple (borrowed), else declined.
unsafe fn items<'a>(o: *mut ffi::PyObject) -> Enc<&'a [*mut ffi::PyObject]> {
    if ffi::PyList_CheckExact(o) != 0 {
        let l = o as *mut ffi::PyListObject;
        Ok(std::slice::from_raw_parts((*l).ob_item, ffi::PyList_GET_SIZE(o) as usize))
    } else if ffi::PyTuple_CheckExact(o) != 0 {
        let t = o as *mut ffi::PyTupleObject;
        Ok(std::slice::from_raw_parts((*t).ob_item.as_ptr(), ffi::PyTuple_GET_SIZE(o) as usize))
    } else {
        Err(Decline)
    }
}

// --------------------------------------------------------------------------------------------
// records

/// What the reference's record loop determines besides the bytes.
pub struct Plain {
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub count: i32,
}

/// The optional arguments of `encode_batch` that shape the records.
struct Shape {
    base_offset: i64,
    delete_horizon_ms: Option<i64>,
    last_offset_delta: Option<i64>,
    max_timestamp: Option<i64>,
    base_timestamp: Option<i64>,
}

/// The header block of one record (`_encode_headers`), validated before anything is written.
unsafe fn headers<'a>(o: *mut ffi::PyObject, hs: &mut Vec<(&'a [u8], Option<&'a [u8]>)>) -> Enc<()> {
    hs.clear();
    if o == ffi::Py_None() { return Ok(()); } // falsy: the reference writes no headers
    for &h in items(o)? {
        if ffi::PyTuple_CheckExact(h) == 0 || ffi::PyTuple_GET_SIZE(h) != 2 { return Err(Decline); }
        let (k, v) = (ffi::PyTuple_GET_ITEM(h, 0), ffi::PyTuple_GET_ITEM(h, 1));
        if ffi::PyUnicode_CheckExact(k) == 0 { return Err(Decline); }
        let mut n: ffi::Py_ssize_t = 0;
        let p = ffi::PyUnicode_AsUTF8AndSize(k, &mut n);
        if p.is_null() { // a lone surrogate: the reference's UnicodeEncodeError
            ffi::PyErr_Clear();
            return Err(Decline);
        }
        hs.push((std::slice::from_raw_parts(p as *const u8, n as usize), blob(v)?));
    }
    Ok(())
}

#[inline(always)]
fn field_size(b: Option<&[u8]>) -> Enc<usize> {
    match b {
        None => Ok(1),
        Some(b) if b.len() <= i32::MAX as usize => Ok(varint_size(b.len() as i32) + b.len()),
        Some(_) => Err(Decline),
    }
}

#[inline(always)]
fn put_field(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.push(1),
        Some(b) => {
            put_leb128(out, ((b.len() as u32) << 1) as u64);
            out.extend_from_slice(b);
        }
    }
}

/// The reference's record loop: every record appended to `out` as `DefaultRecord` bytes, with
/// the reference's checks (declined rather than raised).
fn write_records(py: Python<'_>, records: &Bound<'_, PyAny>, record_type: &Bound<'_, PyType>, s: &Shape,
                 out: &mut Vec<u8>) -> PyResult<Enc<Plain>> {
    let reader = Reader::new(py, record_type)?;
    // A list as a tuple of its records: the attribute reads of objects other than `Record` run
    // Python code, which could resize the list under a borrowed view of it.
    let records = match records.downcast_exact::<PyList>() {
        Ok(l) => l.to_tuple().into_any(),
        Err(_) => records.clone(),
    };
    Ok(unsafe { write_with(&reader, records.as_ptr(), s, out) })
}

unsafe fn write_with(reader: &Reader<'_>, records: *mut ffi::PyObject, s: &Shape, out: &mut Vec<u8>) -> Enc<Plain> {
    let rs = items(records)?;
    if rs.is_empty() || rs.len() > i32::MAX as usize { return Err(Decline); }
    let first = reader.fields(rs[0])?;
    let first_ts = int64(first.f[1])?;
    let base_ts = match (s.base_timestamp, s.delete_horizon_ms) {
        (Some(_), Some(_)) => return Err(Decline),
        (Some(b), None) => b,
        (None, Some(h)) => h,
        (None, None) => first_ts,
    };
    if base_ts < 0 && base_ts != -1 { return Err(Decline); }
    let first_offset = int64(first.f[0])?;
    if first_offset < s.base_offset { return Err(Decline); }
    drop(first);
    let mut prev = first_offset as i128 - 1;
    let mut max_ts = first_ts;
    let mut hs: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
    let start = out.len();
    for (i, &r) in rs.iter().enumerate() {
        if i == 1 { // size the buffer once, from the first record: records of a batch are usually alike
            // (a guess, capped: a large first record before many small ones must not reserve
            // count x its size, whose failure would abort the process; Vec grows past the cap)
            let first = out.len() - start;
            out.reserve(first.saturating_mul(rs.len() - 1).saturating_add(first * rs.len() / 8).min(RESERVE_CAP));
        }
        let f = reader.fields(r)?;
        let off = int64(f.f[0])? as i128;
        if off <= prev { return Err(Decline); }
        prev = off;
        let ts = int64(f.f[1])?;
        if ts > max_ts { max_ts = ts; }
        let ts_delta = ts as i128 - base_ts as i128;
        if ts_delta < i64::MIN as i128 || ts_delta > i64::MAX as i128 { return Err(Decline); }
        let off_delta = off - s.base_offset as i128;
        if off_delta > i32::MAX as i128 { return Err(Decline); }
        let key = blob(f.f[2])?;
        let value = blob(f.f[3])?;
        let hobj = f.f[4];
        let with_headers = hobj != ffi::Py_None() && !items(hobj)?.is_empty();
        let mut size = 1 + varlong_size(ts_delta as i64) + varint_size(off_delta as i32) + field_size(key)? + field_size(value)?;
        if with_headers {
            headers(hobj, &mut hs)?;
            if hs.len() > i32::MAX as usize { return Err(Decline); }
            size += varint_size(hs.len() as i32);
            for (k, v) in &hs {
                size += field_size(Some(k))? + field_size(*v)?;
            }
        } else {
            size += 1;
        }
        if size > i32::MAX as usize { return Err(Decline); }
        put_leb128(out, ((size as u32) << 1) as u64);
        out.push(0);
        put_varlong(out, ts_delta)?;
        put_varint(out, off_delta as i64)?;
        put_field(out, key);
        put_field(out, value);
        if with_headers {
            put_leb128(out, ((hs.len() as u32) << 1) as u64);
            for (k, v) in &hs {
                put_field(out, Some(k));
                put_field(out, *v);
            }
        } else {
            out.push(0);
        }
    }
    let lod = (prev - s.base_offset as i128) as i64;
    let lod = match s.last_offset_delta {
        None => lod,
        Some(l) if lod <= l && l <= i32::MAX as i64 => l,
        Some(_) => return Err(Decline),
    };
    Ok(Plain {
        last_offset_delta: lod as i32,
        base_timestamp: base_ts,
        max_timestamp: s.max_timestamp.unwrap_or(max_ts),
        count: rs.len() as i32,
    })
}

fn shape(base_offset: &Bound<'_, PyAny>, delete_horizon_ms: &Bound<'_, PyAny>, last_offset_delta: &Bound<'_, PyAny>,
         max_timestamp: &Bound<'_, PyAny>, base_timestamp: &Bound<'_, PyAny>) -> Enc<Shape> {
    Ok(Shape {
        base_offset: unsafe { int64(base_offset.as_ptr())? },
        delete_horizon_ms: opt_int64(delete_horizon_ms)?,
        last_offset_delta: opt_int64(last_offset_delta)?,
        max_timestamp: opt_int64(max_timestamp)?,
        base_timestamp: opt_int64(base_timestamp)?,
    })
}

/// `encode_batch(records, record_type, base_offset, attributes, partition_leader_epoch,
/// producer_id, producer_epoch, base_sequence, delete_horizon_ms, last_offset_delta,
/// max_timestamp, base_timestamp)`: the whole uncompressed batch (`attributes` as the reference's
/// `_attributes` computed them, codec bits 0), or None: run the reference.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn encode_batch<'py>(py: Python<'py>, records: &Bound<'py, PyAny>, record_type: &Bound<'py, PyType>,
                         base_offset: &Bound<'py, PyAny>, attributes: i16, partition_leader_epoch: &Bound<'py, PyAny>,
                         producer_id: &Bound<'py, PyAny>, producer_epoch: &Bound<'py, PyAny>,
                         base_sequence: &Bound<'py, PyAny>, delete_horizon_ms: &Bound<'py, PyAny>,
                         last_offset_delta: &Bound<'py, PyAny>, max_timestamp: &Bound<'py, PyAny>,
                         base_timestamp: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyBytes>>> {
    if attributes & 7 != 0 { return Ok(None); }
    let Ok(s) = shape(base_offset, delete_horizon_ms, last_offset_delta, max_timestamp, base_timestamp) else { return Ok(None) };
    let Ok((epoch, pid, pepoch, seq)) = (|| -> Enc<_> {
        Ok((int_in(partition_leader_epoch, i32::MIN as i64, i32::MAX as i64)? as i32, int_in(producer_id, i64::MIN, i64::MAX)?,
            int_in(producer_epoch, i16::MIN as i64, i16::MAX as i64)? as i16,
            int_in(base_sequence, i32::MIN as i64, i32::MAX as i64)? as i32))
    })() else { return Ok(None) };
    let mut out = vec![0u8; HEADER_SIZE];
    let Ok(plain) = write_records(py, records, record_type, &s, &mut out)? else { return Ok(None) };
    let sealing = Sealing {
        base_offset: s.base_offset,
        partition_leader_epoch: epoch,
        attributes,
        last_offset_delta: plain.last_offset_delta,
        base_timestamp: plain.base_timestamp,
        max_timestamp: plain.max_timestamp,
        producer_id: pid,
        producer_epoch: pepoch,
        base_sequence: seq,
        records_count: plain.count,
    };
    if seal(&mut out, &sealing).is_err() { return Ok(None); }
    Ok(Some(PyBytes::new(py, &out)))
}

/// `encode_records(records, record_type, base_offset, delete_horizon_ms, last_offset_delta,
/// max_timestamp, base_timestamp)`: the plain record bytes of a batch the reference's codec then
/// compresses, with the header fields they determine: `(payload, last_offset_delta,
/// base_timestamp, max_timestamp)`, or None: run the reference.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn encode_records<'py>(py: Python<'py>, records: &Bound<'py, PyAny>, record_type: &Bound<'py, PyType>,
                           base_offset: &Bound<'py, PyAny>, delete_horizon_ms: &Bound<'py, PyAny>,
                           last_offset_delta: &Bound<'py, PyAny>, max_timestamp: &Bound<'py, PyAny>,
                           base_timestamp: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Ok(s) = shape(base_offset, delete_horizon_ms, last_offset_delta, max_timestamp, base_timestamp) else { return Ok(None) };
    let mut out = Vec::new();
    let Ok(plain) = write_records(py, records, record_type, &s, &mut out)? else { return Ok(None) };
    Ok(Some(PyTuple::new(py, [
        PyBytes::new(py, &out).into_any(),
        plain.last_offset_delta.into_pyobject(py)?.into_any(),
        plain.base_timestamp.into_pyobject(py)?.into_any(),
        plain.max_timestamp.into_pyobject(py)?.into_any(),
    ])?))
}
