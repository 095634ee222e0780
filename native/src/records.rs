//! Batches to `Record` objects (`decode_v2`'s compiled twin).
//!
//! `Record` is a slotted, frozen dataclass: building one through Python (`__init__`, then
//! `object.__setattr__` per field) costs more than the whole decode. So each record is allocated
//! with the type's own allocator and its five slots are stored directly, at the offsets its
//! member descriptors give (CPython lays slots out in sorted name order, not declaration order).
//! Records are then untracked from the cycle collector: they hold ints, bytes, None and a tuple
//! of (str, bytes) pairs, so they cannot be part of a cycle, and 1,000 tracked objects per batch
//! made every generation-0 collection walk them (160 -> 90 ns per record).
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple, PyType};

use crate::batch::{self, Header, Rec, HEADER_SIZE};
use crate::buffers::{view, Buf};
use crate::codec;

#[repr(C)]
struct MemberDescr {
    ob_base: ffi::PyObject,
    d_type: *mut ffi::PyTypeObject,
    d_name: *mut ffi::PyObject,
    d_qualname: *mut ffi::PyObject,
    d_member: *mut ffi::PyMemberDef,
}

const FIELDS: [&str; 5] = ["offset", "timestamp", "key", "value", "headers"];

/// Byte offsets of the record type's five slots, read from its member descriptors.
pub(crate) fn slot_offsets(t: &Bound<'_, PyType>) -> PyResult<[usize; 5]> {
    if unsafe { (*t.as_type_ptr()).tp_basicsize } != (2 + FIELDS.len() as isize) * 8 {
        return Err(PyValueError::new_err("the record type does not have exactly the five slots of Record"));
    }
    let mut out = [0usize; 5];
    let member_type = std::ptr::addr_of_mut!(ffi::PyMemberDescr_Type);
    for (i, name) in FIELDS.iter().enumerate() {
        let d = t.getattr(*name)?;
        if unsafe { ffi::Py_TYPE(d.as_ptr()) } != member_type {
            return Err(PyValueError::new_err(format!("record type field {name} is not a slot")));
        }
        out[i] = unsafe { (*(*(d.as_ptr() as *mut MemberDescr)).d_member).offset as usize };
    }
    Ok(out)
}

#[inline(always)]
unsafe fn bytes_or_none(b: &[u8], f: Option<(usize, usize)>) -> *mut ffi::PyObject {
    match f {
        Some((p, l)) => ffi::PyBytes_FromStringAndSize(b[p..p + l].as_ptr() as *const _, l as ffi::Py_ssize_t),
        None => {
            let n = ffi::Py_None();
            ffi::Py_INCREF(n);
            n
        }
    }
}

fn headers_tuple<'py>(py: Python<'py>, b: &[u8], r: &Rec, empty: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyTuple>> {
    if r.has_no_headers(b) {
        return Ok(empty.clone());
    }
    let hs = batch::headers(b, r)?;
    PyTuple::new(py, hs.into_iter().map(|(k, v)| (k, v.map(|v| PyBytes::new(py, v)))))
}

/// `decode_records(batch, plain, record_type)`: every record of one v2 batch as `record_type`
/// objects (`storage_engine.record.Record`). `batch` is the whole batch (bytes, memoryview or an
/// mmap slice, not copied); `plain` its decompressed records, or None: then an uncompressed
/// batch's records are read in place and lz4/zstd ones are decompressed here (`codec`, without
/// the GIL, into the thread's reused buffer). None when the records need Python's codec call
/// (gzip, snappy, or a stream `codec` refuses): the caller decompresses and calls again with
/// `plain`; None for `plain` too when an offset or timestamp leaves int64 (see `build`): the
/// reference builds those records. The CRC is not checked here (the caller's `verify` does, as the reference's
/// `decode_v2` leaves it to `verify_v2`).
#[pyfunction]
#[pyo3(signature = (batch, plain, record_type))]
pub fn decode_records<'py>(py: Python<'py>, batch: Buf, plain: Option<Buf>, record_type: &Bound<'py, PyType>)
                           -> PyResult<Option<Bound<'py, PyList>>> {
    let data = view(&batch)?;
    let h: Header = batch::header(data)?;
    if h.records_count == 0 {
        return Ok(Some(PyList::empty(py)));
    }
    match &plain {
        Some(p) => build(py, &h, view(p)?, record_type),
        None if h.codec() == 0 => build(py, &h, &data[HEADER_SIZE..], record_type),
        None if codec::native(h.codec()) => {
            let mut scratch = codec::take_scratch();
            let input = &data[HEADER_SIZE..];
            let done = py.allow_threads(|| codec::decompress(h.codec(), input, &mut scratch));
            let out = match done {
                Ok(n) => build(py, &h, &scratch[..n], record_type),
                Err(codec::Refused) => Ok(None),
            };
            codec::give_back(scratch);
            out
        }
        None => Ok(None),
    }
}

/// The records of plain record bytes `b` of the batch with header `h`; None when an offset or
/// timestamp leaves int64 (only a damaged batch's: its base offset is outside the CRC), which
/// the reference's unbounded ints then build. A failure of Python itself (out of memory) is
/// raised as it is, not as bytes the core rejects.
fn build<'py>(py: Python<'py>, h: &Header, b: &[u8], record_type: &Bound<'py, PyType>)
              -> PyResult<Option<Bound<'py, PyList>>> {
    let so = slot_offsets(record_type)?;
    let tp = record_type.as_type_ptr();
    let empty = PyTuple::empty(py);
    let list = PyList::empty(py);
    let lat = h.log_append_time();
    let mut failure: Option<PyErr> = None;
    let mut overflow = false;
    let walked = batch::walk(h, b, false, |_, r| {
        let (Some(offset), Some(timestamp)) = (
            h.base_offset.checked_add(r.offset_delta),
            if lat { Some(h.max_timestamp) } else { h.base_timestamp.checked_add(r.timestamp_delta) },
        ) else {
            overflow = true;
            return Err(batch::Corrupt("an offset or timestamp beyond int64".into()));
        };
        let headers = match headers_tuple(py, b, r, &empty) {
            Ok(t) => t,
            Err(e) if e.is_instance_of::<crate::CorruptBatch>(py) => return Err(batch::Corrupt(e.to_string())),
            Err(e) => {
                failure = Some(e);
                return Err(batch::Corrupt("python error".into()));
            }
        };
        unsafe {
            let o = ffi::PyType_GenericAlloc(tp, 0);
            if o.is_null() {
                failure = Some(PyErr::fetch(py));
                return Err(batch::Corrupt("python error".into()));
            }
            // owned from here: dropping it (on any failure below) frees the slots set so far
            let rec = Bound::from_owned_ptr(py, o);
            ffi::PyObject_GC_UnTrack(o as *mut std::ffi::c_void);
            let slot = |j: usize| (o as *mut u8).add(so[j]) as *mut *mut ffi::PyObject;
            *slot(4) = headers.into_ptr();
            let fields = [ffi::PyLong_FromLongLong(offset), ffi::PyLong_FromLongLong(timestamp),
                          bytes_or_none(b, r.key), bytes_or_none(b, r.value)];
            for (j, value) in fields.into_iter().enumerate() {
                *slot(j) = value;
            }
            if fields.iter().any(|v| v.is_null()) {
                failure = Some(PyErr::fetch(py));
                return Err(batch::Corrupt("python error".into()));
            }
            if let Err(e) = list.append(rec) {
                failure = Some(e);
                return Err(batch::Corrupt("python error".into()));
            }
        }
        Ok(())
    });
    if let Some(e) = failure {
        return Err(e);
    }
    if overflow {
        return Ok(None);
    }
    walked?;
    Ok(Some(list))
}

/// `decompress(codec, payload)`: what `decode_records` decompresses a batch's `payload` (its
/// bytes after the header) to, or None where it leaves the stream to Python's codec call. The
/// window the differential tests and the fuzzer use to hold `codec` to the reference's
/// `compression.decompress` directly (equal bytes whenever this is not None).
#[pyfunction]
pub fn decompress<'py>(py: Python<'py>, codec: i16, payload: Buf) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let input = view(&payload)?;
    let mut out = codec::take_scratch();
    let done = match py.allow_threads(|| codec::decompress(codec, input, &mut out)) {
        Ok(n) => Some(PyBytes::new(py, &out[..n])),
        Err(codec::Refused) => None,
    };
    codec::give_back(out);
    Ok(done)
}
