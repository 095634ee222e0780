//! The cleaner's output batch: the compiled twin of `rebuild_v2_batch`
//! (storage_engine/record/rewrite.py), the byte side of Kafka's `MemoryRecords.filterTo`.
//!
//! The rules (the new base timestamp, which timestamp a record has, the attributes) stay in the
//! reference's `RebuildPlan`, computed in Python; this side copies the survivors' bytes,
//! restamps the records whose timestamp delta changes against the new base, and seals the batch.
//! Anything it does not take (spans outside the buffer, a record it cannot restamp, a value out
//! of range) returns None, and the reference runs and raises its own error.
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::batch;
use crate::buffers::view;
use crate::encode::{put_varint, put_varlong, seal, Decline, Enc, Sealing, HEADER_SIZE};

/// `restamp_record`: the record `r` with its timestamp delta replaced, the length prefix
/// recomputed, the rest copied.
fn restamp(out: &mut Vec<u8>, r: &[u8], delta: i128) -> Enc<()> {
    let n = r.len();
    let mut p = 0usize;
    batch::varint(r, &mut p, n, 5).map_err(|_| Decline)?;
    if p >= n { return Err(Decline); }
    let attributes = r[p];
    let mut q = p + 1;
    batch::varint(r, &mut q, n, 10).map_err(|_| Decline)?;
    let mut ts = Vec::with_capacity(10);
    put_varlong(&mut ts, delta)?;
    put_varint(out, (1 + ts.len() + (n - q)) as i64)?;
    out.push(attributes);
    out.extend_from_slice(&ts);
    out.extend_from_slice(&r[q..]);
    Ok(())
}

fn int(o: &Bound<'_, PyAny>) -> Enc<i64> { o.extract::<i64>().map_err(|_| Decline) }

/// One span `(start, end, timestamp delta)`: an exact 3-tuple of ints inside the buffer.
fn span(o: &Bound<'_, PyAny>, len: usize) -> Enc<(usize, usize, i64)> {
    let t = o.downcast_exact::<PyTuple>().map_err(|_| Decline)?;
    if t.len() != 3 { return Err(Decline); }
    let (s, e, d) = (int(&t.get_item(0).map_err(|_| Decline)?)?, int(&t.get_item(1).map_err(|_| Decline)?)?,
                     int(&t.get_item(2).map_err(|_| Decline)?)?);
    if s < 0 || s > e || e as u64 > len as u64 { return Err(Decline); }
    Ok((s as usize, e as usize, d))
}

struct Plan {
    base_timestamp: i64,
    new_base_timestamp: i64,
    fixed_timestamp: Option<i64>,
}

/// The survivors' bytes appended to `out`; returns the batch's max timestamp.
fn survivors(out: &mut Vec<u8>, buf: &[u8], spans: &Bound<'_, PyAny>, plan: &Plan) -> Enc<(i64, i32)> {
    let list: Vec<Bound<'_, PyAny>> = if let Ok(l) = spans.downcast_exact::<pyo3::types::PyList>() {
        l.iter().collect()
    } else if let Ok(t) = spans.downcast_exact::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(Decline);
    };
    if list.is_empty() || list.len() > i32::MAX as usize { return Err(Decline); }
    let mut max_ts = i128::MIN;
    for o in &list {
        let (s, e, d) = span(o, buf.len())?;
        let ts = match plan.fixed_timestamp {
            Some(t) => t as i128,
            None => plan.base_timestamp as i128 + d as i128,
        };
        max_ts = max_ts.max(ts);
        let delta = ts - plan.new_base_timestamp as i128;
        if delta == d as i128 {
            out.extend_from_slice(&buf[s..e]);
        } else {
            restamp(out, &buf[s..e], delta)?;
        }
    }
    if max_ts > i64::MAX as i128 || max_ts < i64::MIN as i128 { return Err(Decline); }
    Ok((max_ts as i64, list.len() as i32))
}

/// `rebuild_v2(buf, spans, base_timestamp, new_base_timestamp, fixed_timestamp, header)`: the
/// survivors of `buf` at `spans` restamped against `new_base_timestamp` (a record's timestamp
/// being `fixed_timestamp` when given, else `base_timestamp` + its delta). With `header` =
/// `(base_offset, partition_leader_epoch, attributes, last_offset_delta, producer_id,
/// producer_epoch, base_sequence)` the whole uncompressed batch, else the plain records for the
/// reference's codec; either with the batch's max timestamp, or None: run the reference.
#[pyfunction]
#[pyo3(signature = (buf, spans, base_timestamp, new_base_timestamp, fixed_timestamp, header))]
pub fn rebuild_v2<'py>(py: Python<'py>, buf: &Bound<'py, PyAny>, spans: &Bound<'py, PyAny>,
                       base_timestamp: &Bound<'py, PyAny>, new_base_timestamp: &Bound<'py, PyAny>,
                       fixed_timestamp: &Bound<'py, PyAny>, header: &Bound<'py, PyAny>)
                       -> PyResult<Option<(Bound<'py, PyBytes>, i64)>> {
    let Ok(b) = PyBuffer::<u8>::get(buf) else { return Ok(None) };
    let Ok(data) = view(&b) else { return Ok(None) }; // not contiguous: the reference slices it
    let run = || -> Enc<(Vec<u8>, i64)> {
        let plan = Plan {
            base_timestamp: int(base_timestamp)?,
            new_base_timestamp: int(new_base_timestamp)?,
            fixed_timestamp: if fixed_timestamp.is_none() { None } else { Some(int(fixed_timestamp)?) },
        };
        if header.is_none() {
            let mut out = Vec::with_capacity(data.len());
            let (max_ts, _) = survivors(&mut out, data, spans, &plan)?;
            return Ok((out, max_ts));
        }
        let (base_offset, epoch, attributes, lod, pid, pepoch, seq): (i64, i32, i16, i32, i64, i16, i32) =
            header.extract().map_err(|_| Decline)?;
        let mut out = Vec::with_capacity(HEADER_SIZE + data.len());
        out.resize(HEADER_SIZE, 0);
        let (max_ts, count) = survivors(&mut out, data, spans, &plan)?;
        seal(&mut out, &Sealing {
            base_offset,
            partition_leader_epoch: epoch,
            attributes,
            last_offset_delta: lod,
            base_timestamp: plan.new_base_timestamp,
            max_timestamp: max_ts,
            producer_id: pid,
            producer_epoch: pepoch,
            base_sequence: seq,
            records_count: count,
        })?;
        Ok((out, max_ts))
    };
    Ok(run().ok().map(|(out, max_ts)| (PyBytes::new(py, &out), max_ts)))
}
