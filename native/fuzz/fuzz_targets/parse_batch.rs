//! Hostile bytes through the batch parser: a v2 batch's header and CRC check, then the record
//! walk with headers, as `decode_v2` runs them. Any panic, out-of-bounds read or oversized
//! allocation is a libFuzzer crash; an `Err` is the expected answer to damaged bytes. The CRC is
//! checked on the input as given and the walk also runs without it, so the fuzzer need not
//! forge checksums to reach the record parser.
#![no_main]

use _core::batch::{capacity, check_batch, header, walk, HEADER_SIZE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = check_batch(data);
    if let Ok(h) = header(data) {
        let records = &data[HEADER_SIZE.min(data.len())..];
        let mut seen = Vec::with_capacity(capacity(&h, records));
        let _ = walk(&h, records, true, |i, r| {
            seen.push((i, r.start, r.end));
            Ok(())
        });
    }
});
