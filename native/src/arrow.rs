//! Batches to Arrow column buffers with no Python object per record: the compiled path of
//! `storage_engine.record.columnar.batches_to_arrow`.
//!
//! The walk fills plain little-endian buffers in Arrow's layout (int64 `offset` and `timestamp`,
//! int32 `timestampType`, binary `key`/`value` as int32 offsets + data + validity bitmap, and the
//! `headers` column `list<struct<key: string, value: binary>>` as list offsets over a struct of a
//! string and a binary child). Each buffer is handed to Python as a [`Column`], which exports it
//! through the buffer protocol, so `pa.py_buffer` wraps it without a copy and
//! `pa.Array.from_buffers` assembles the columns. The walk itself runs without the GIL.
//!
//! The batch-level selection (control batches, batches outside the offset window by header,
//! legacy magics) stays in Python, and so does the decompression of gzip and snappy; lz4 and
//! zstd records are decompressed here (`codec`), one batch at a time into one reused buffer; this module repeats only the per-record
//! rule of the reference: a batch with its first or last record outside
//! `[min_offset, max_offset)` is filtered record by record, otherwise it is taken whole.
use std::os::raw::c_int;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::batch::{self, Corrupt, Header, Rec, HEADER_SIZE};
use crate::codec;
use crate::buffers::{view, Buf};

/// An immutable byte buffer Rust built, exported read-only through the buffer protocol.
#[pyclass(frozen, module = "storage_engine.native._core")]
pub struct Column {
    data: Vec<u8>,
}

#[pymethods]
impl Column {
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        let d = &slf.get().data;
        // Fills a one-dimensional byte view and takes a reference to `slf`; refuses PyBUF_WRITABLE.
        if ffi::PyBuffer_FillInfo(view, slf.as_ptr(), d.as_ptr() as *mut _, d.len() as ffi::Py_ssize_t, 1, flags) != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> usize { self.data.len() }
}

/// Why a walk stopped: bytes the reference must name, or a column past Arrow's 32-bit offsets
/// (the caller then runs the reference, which decides what such input gives).
enum Stop {
    Corrupt(Corrupt),
    TooLarge,
    /// records that need Python's codec call (gzip, snappy, or a stream `codec` refuses)
    Refused,
}

impl From<Corrupt> for Stop {
    fn from(c: Corrupt) -> Self { Stop::Corrupt(c) }
}

#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    len: usize,
    nulls: usize,
}

impl Bits {
    #[inline(always)]
    fn push(&mut self, valid: bool) {
        if self.len.is_multiple_of(8) { self.bytes.push(0); }
        if valid { self.bytes[self.len / 8] |= 1 << (self.len % 8); } else { self.nulls += 1; }
        self.len += 1;
    }
}

/// A binary (or string) column: int32 offsets, data, validity.
struct Binary {
    offsets: Vec<u8>,
    data: Vec<u8>,
    valid: Bits,
}

impl Binary {
    fn new() -> Self { Binary { offsets: 0i32.to_le_bytes().to_vec(), data: Vec::new(), valid: Bits::default() } }

    #[inline(always)]
    fn put(&mut self, v: Option<&[u8]>) -> Result<(), Stop> {
        self.valid.push(v.is_some());
        if let Some(v) = v { self.data.extend_from_slice(v); }
        let end = i32::try_from(self.data.len()).map_err(|_| Stop::TooLarge)?;
        self.offsets.extend_from_slice(&end.to_le_bytes());
        Ok(())
    }

    fn reserve(&mut self, rows: usize, bytes: usize) {
        self.offsets.reserve(rows * 4);
        self.data.reserve(bytes);
        self.valid.bytes.reserve(rows / 8 + 1);
    }
}

struct Cols {
    rows: usize,
    offset: Vec<u8>,
    timestamp: Vec<u8>,
    timestamp_type: Vec<u8>,
    key: Binary,
    value: Binary,
    header_offsets: Vec<u8>,
    headers: usize,
    header_key: Binary,
    header_value: Binary,
}

impl Cols {
    fn new() -> Self {
        Cols {
            rows: 0,
            offset: Vec::new(),
            timestamp: Vec::new(),
            timestamp_type: Vec::new(),
            key: Binary::new(),
            value: Binary::new(),
            header_offsets: 0i32.to_le_bytes().to_vec(),
            headers: 0,
            header_key: Binary::new(),
            header_value: Binary::new(),
        }
    }

    /// One batch's records (after `batch::walk` accepted them all), `take` those to emit.
    fn batch(&mut self, h: &Header, b: &[u8], lo: i64, hi: Option<i64>, recs: &mut Vec<Rec>) -> Result<(), Stop> {
        recs.clear();
        recs.reserve(batch::capacity(h, b));
        batch::walk(h, b, false, |_, r| {
            recs.push(*r);
            Ok(())
        })?;
        let offset = |r: &Rec| h.base_offset.checked_add(r.offset_delta).ok_or_else(|| Corrupt("offset overflows".into()));
        // The reference filters record by record only when the batch's first or last record
        // lies outside the window (offsets inside a batch are not checked to ascend).
        let (first, last) = (offset(&recs[0])?, offset(&recs[recs.len() - 1])?);
        let filter = first < lo || hi.is_some_and(|hi| last >= hi);
        let lat = h.log_append_time();
        self.reserve(recs.len(), b.len());
        for r in recs.iter() {
            let o = offset(r)?;
            // every record's headers are checked, also those of records filtered out
            let hs = if r.has_no_headers(b) { Vec::new() } else { batch::headers(b, r)? };
            let ts = if lat {
                h.max_timestamp
            } else {
                h.base_timestamp.checked_add(r.timestamp_delta).ok_or_else(|| Corrupt("timestamp overflows".into()))?
            };
            if filter && !(lo <= o && hi.is_none_or(|hi| o < hi)) {
                continue;
            }
            self.offset.extend_from_slice(&o.to_le_bytes());
            self.timestamp.extend_from_slice(&ts.to_le_bytes());
            self.timestamp_type.extend_from_slice(&(lat as i32).to_le_bytes());
            self.key.put(r.key.map(|(p, l)| &b[p..p + l]))?;
            self.value.put(r.value.map(|(p, l)| &b[p..p + l]))?;
            for (k, v) in hs.iter() {
                self.header_key.put(Some(k.as_bytes()))?;
                self.header_value.put(*v)?;
            }
            self.headers += hs.len();
            let end = i32::try_from(self.headers).map_err(|_| Stop::TooLarge)?;
            self.header_offsets.extend_from_slice(&end.to_le_bytes());
            self.rows += 1;
        }
        Ok(())
    }

    fn reserve(&mut self, rows: usize, bytes: usize) {
        self.offset.reserve(rows * 8);
        self.timestamp.reserve(rows * 8);
        self.timestamp_type.reserve(rows * 4);
        self.header_offsets.reserve(rows * 4);
        self.key.reserve(rows, 0);
        self.value.reserve(rows, bytes);
    }
}

/// A batch's header (size and CRC checked first when `verify`) and its plain records: `plain`,
/// the bytes after the header, or decompressed into `scratch` (lz4, zstd). None for an empty
/// batch (Kafka does not read its payload).
fn records_of<'a>(data: &'a [u8], plain: Option<&'a [u8]>, verify: bool, scratch: &'a mut Vec<u8>)
                  -> Result<Option<(Header, &'a [u8])>, Stop> {
    let h = if verify { batch::check_batch(data)? } else { batch::header(data)? };
    if h.records_count == 0 {
        return Ok(None);
    }
    let b = match plain {
        Some(p) => p,
        None if h.codec() == 0 => &data[HEADER_SIZE..],
        None => {
            let n = codec::decompress(h.codec(), &data[HEADER_SIZE..], scratch).map_err(|_| Stop::Refused)?;
            &scratch[..n]
        }
    };
    Ok(Some((h, b)))
}

fn column(py: Python<'_>, data: Vec<u8>) -> PyResult<PyObject> { Ok(Py::new(py, Column { data })?.into_any()) }

/// `(validity or None, null count, offsets, data)` of a binary column.
fn binary<'py>(py: Python<'py>, c: Binary) -> PyResult<Bound<'py, PyTuple>> {
    let valid = if c.valid.nulls > 0 { Some(column(py, c.valid.bytes)?) } else { None };
    PyTuple::new(py, [valid.into_pyobject(py)?.into_any().unbind(), c.valid.nulls.into_pyobject(py)?.into_any().unbind(),
                      column(py, c.offsets)?, column(py, c.data)?])
}

/// `decode_arrow(batches, verify, min_offset, max_offset)`: the records of `batches` (a list of
/// `(whole v2 batch, its decompressed records or None)`; None: uncompressed, or lz4/zstd records
/// this call decompresses itself) as Arrow buffers: `(rows, offset, timestamp, timestampType,
/// key, value, header list offsets, header count, header key, header value)`, each binary column
/// as `(validity or None, nulls, offsets, data)`. None when a column would pass Arrow's 2 GB
/// offsets (the caller runs the reference). A list of indices when batches given without their
/// records need Python's codec call (gzip, snappy, or streams `codec` refuses): the caller
/// decompresses those and calls again. `verify` checks each batch's size and CRC
/// (`batch::check_batch`) before its records are read. Raises `CorruptBatch` for bytes it does
/// not accept.
#[pyfunction]
#[pyo3(signature = (batches, verify, min_offset, max_offset))]
pub fn decode_arrow<'py>(py: Python<'py>, batches: Vec<(Buf, Option<Buf>)>, verify: bool, min_offset: i64,
                         max_offset: Option<i64>) -> PyResult<PyObject> {
    let mut views: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(batches.len());
    for (b, p) in batches.iter() {
        views.push((view(b)?, match p { Some(p) => Some(view(p)?), None => None }));
    }
    let mut scratch = codec::take_scratch();
    let built = py.allow_threads(|| {
        let mut cols = Cols::new();
        let mut recs = Vec::new();
        let mut refused: Vec<usize> = Vec::new();
        for (i, (data, plain)) in views.iter().enumerate() {
            if refused.is_empty() {
                match records_of(data, *plain, verify, &mut scratch) {
                    Err(Stop::Refused) => refused.push(i),
                    Err(e) => return Err(e),
                    Ok(None) => {}
                    Ok(Some((h, b))) => cols.batch(&h, b, min_offset, max_offset, &mut recs)?,
                }
            } else if let Err(Stop::Refused) = records_of(data, *plain, verify, &mut scratch) {
                // after a refusal only the other refusals are collected: the next call has them all
                refused.push(i);
            }
        }
        Ok::<_, Stop>((cols, refused))
    });
    codec::give_back(scratch);
    let c = match built {
        Ok((_, refused)) if !refused.is_empty() => return Ok(refused.into_pyobject(py)?.into_any().unbind()),
        Ok((c, _)) => c,
        Err(Stop::TooLarge) => return Ok(py.None()),
        Err(Stop::Corrupt(e)) => return Err(e.into()),
        Err(Stop::Refused) => unreachable!("a refusal is collected, not returned"),
    };
    let items: Vec<PyObject> = vec![
        c.rows.into_pyobject(py)?.into_any().unbind(),
        column(py, c.offset)?,
        column(py, c.timestamp)?,
        column(py, c.timestamp_type)?,
        binary(py, c.key)?.into_any().unbind(),
        binary(py, c.value)?.into_any().unbind(),
        column(py, c.header_offsets)?,
        c.headers.into_pyobject(py)?.into_any().unbind(),
        binary(py, c.header_key)?.into_any().unbind(),
        binary(py, c.header_value)?.into_any().unbind(),
    ];
    Ok(PyTuple::new(py, items)?.into_any().unbind())
}
