//! Python buffers (bytes, memoryview, mmap slices) as byte slices, without copying.
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::batch::{self, HEADER_SIZE};

pub type Buf = PyBuffer<u8>;

/// The bytes of a contiguous buffer; the `PyBuffer` keeps its exporter alive and pinned.
pub fn view(b: &Buf) -> PyResult<&[u8]> {
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err("buffer is not contiguous"));
    }
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) })
}

/// A batch's plain record bytes: `plain` (its decompressed records) when given, else the bytes
/// after the header. Decompression stays in Python, in the codec libraries the reference uses
/// (`storage_engine.record.compression.decompress`), so both read the same bytes.
pub fn plain_records<'a>(data: &'a [u8], plain: &'a Option<Buf>) -> PyResult<&'a [u8]> {
    match plain {
        Some(p) => view(p),
        None => Ok(&data[HEADER_SIZE..]),
    }
}

impl From<batch::Corrupt> for PyErr {
    fn from(e: batch::Corrupt) -> PyErr { crate::CorruptBatch::new_err(e.0) }
}
