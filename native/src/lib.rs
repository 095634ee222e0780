//! `storage_engine.native._core`: the compiled record core (issue 36). The pure-Python engine
//! is the reference; the switch (`storage_engine/native/__init__.py`) picks one and the tests
//! hold both to the same results. One module per idea:
//!
//! * `batch`: the v2 batch and record parser every entry point shares (no PyO3, fuzzable);
//! * `buffers`: Python buffers as slices;
//! * `codec`: lz4 and zstd decompression of a batch's records (what it refuses stays in Python);
//! * `records`: batches to `Record` objects;
//! * `encode`: `Record` objects to batch bytes, and the batch sealing (header, CRC-32C);
//! * `rebuild`: the cleaner's rebuilt batch from its survivors' bytes;
//! * `arrow`: batches to Arrow column buffers, no Python object per record;
//! * `walk`: the compaction's and the append's record walks;
//! * `keymap`: the cleaner's compact exact key -> offset map (`KeyMap`);
//! * `compact`: the cleaner's map-building and keep/drop walks over a batch.
//!
//! Every function raises `CorruptBatch` on bytes it does not accept; the Python layer then
//! re-reads the batch with the reference to raise the reference's own error.
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub mod batch;
pub mod buffers;
pub mod codec;
pub mod records;
pub mod encode;
pub mod rebuild;
pub mod arrow;
pub mod walk;
pub mod keymap;
pub mod compact;

create_exception!(_core, CorruptBatch, PyValueError, "The compiled core rejected these bytes (the reference names why).");

/// The interface version the Python switch expects (storage_engine.native.ABI).
const ABI: u32 = 1;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI", ABI)?;
    m.add("SOURCE_HASH", env!("CORE_SOURCE_HASH"))?;
    m.add("CorruptBatch", m.py().get_type::<CorruptBatch>())?;
    m.add("PanicException", m.py().get_type::<pyo3::panic::PanicException>())?;
    m.add_function(wrap_pyfunction!(records::decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(records::decompress, m)?)?;
    m.add_function(wrap_pyfunction!(encode::encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(encode::encode_records, m)?)?;
    m.add_function(wrap_pyfunction!(rebuild::rebuild_v2, m)?)?;
    m.add_class::<arrow::Column>()?;
    m.add_function(wrap_pyfunction!(arrow::decode_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(walk::walk_records, m)?)?;
    m.add_function(wrap_pyfunction!(walk::timestamp_deltas, m)?)?;
    m.add_class::<keymap::KeyMap>()?;
    m.add_function(wrap_pyfunction!(compact::map_v2_records, m)?)?;
    m.add_function(wrap_pyfunction!(compact::filter_v2_records, m)?)?;
    m.add_function(wrap_pyfunction!(compact::latest_offsets, m)?)?;
    Ok(())
}
