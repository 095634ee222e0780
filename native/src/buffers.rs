//! Python buffers (bytes, memoryview, mmap slices) as byte slices, without copying.
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::batch;

pub type Buf = PyBuffer<u8>;

/// The bytes of a contiguous buffer; the `PyBuffer` keeps its exporter alive and pinned.
pub fn view(b: &Buf) -> PyResult<&[u8]> {
    if !b.is_c_contiguous() {
        return Err(PyValueError::new_err("buffer is not contiguous"));
    }
    Ok(unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) })
}

impl From<batch::Corrupt> for PyErr {
    fn from(e: batch::Corrupt) -> PyErr { crate::CorruptBatch::new_err(e.0) }
}
