//! The v2 batch and record parser shared by every entry point (records, Arrow, compaction),
//! free of PyO3 so the cargo-fuzz targets link it alone. Safe Rust: every read is bounds-checked,
//! so hostile bytes give an `Err` (or at worst a panic, which PyO3 raises as an exception),
//! never a read outside the buffer.
//!
//! Errors carry a short reason for debugging only: the Python layer re-reads a rejected batch
//! with the reference decoder, whose exception (class and message) is the one users see, so the
//! messages are defined once (storage_engine/record/v2.py).

pub const HEADER_SIZE: usize = 61;
pub const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_CONTROL: i16 = 0x20;

#[derive(Debug)]
pub struct Corrupt(pub String);

pub type Res<T> = Result<T, Corrupt>;

#[macro_export]
macro_rules! corrupt { ($($t:tt)*) => { return Err($crate::batch::Corrupt(format!($($t)*))) } }

/// The fields of a v2 batch header the record walk needs (Kafka's `DefaultRecordBatch`).
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub base_offset: i64,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub records_count: i32,
}

impl Header {
    pub fn codec(&self) -> i16 { self.attributes & 7 }
    pub fn log_append_time(&self) -> bool { self.attributes & ATTR_TIMESTAMP_TYPE != 0 }
    pub fn is_control(&self) -> bool { self.attributes & ATTR_CONTROL != 0 }
}

pub fn be64(d: &[u8], at: usize) -> i64 { i64::from_be_bytes(d[at..at + 8].try_into().unwrap()) }
pub fn be32(d: &[u8], at: usize) -> i32 { i32::from_be_bytes(d[at..at + 4].try_into().unwrap()) }

/// `verify_v2`: size, CRC-32C over bytes 21.., known codec, non-negative count and last delta.
pub fn check_batch(d: &[u8]) -> Res<Header> {
    let h = header(d)?;
    let size = be32(d, 8) as i64 + 12;
    if d.len() as i64 != size { corrupt!("batch of {} bytes declares {size}", d.len()); }
    let stored = be32(d, 17) as u32;
    let computed = crc32c::crc32c(&d[21..]);
    if stored != computed { corrupt!("stored crc {stored}, computed {computed}"); }
    Ok(h)
}

/// The header fields without the CRC check (a batch whose CRC the caller checked already).
pub fn header(d: &[u8]) -> Res<Header> {
    if d.len() < HEADER_SIZE { corrupt!("batch of {} bytes is shorter than its header", d.len()); }
    if d[16] != 2 { corrupt!("magic {} is not 2", d[16]); }
    let h = Header {
        base_offset: be64(d, 0),
        attributes: i16::from_be_bytes([d[21], d[22]]),
        last_offset_delta: be32(d, 23),
        base_timestamp: be64(d, 27),
        max_timestamp: be64(d, 35),
        records_count: be32(d, 57),
    };
    if h.codec() > 4 { corrupt!("unknown codec {}", h.codec()); }
    if h.records_count < 0 { corrupt!("record count {}", h.records_count); }
    if h.last_offset_delta < 0 { corrupt!("last offset delta {}", h.last_offset_delta); }
    Ok(h)
}

/// A zigzag varint (`max_bytes` 5: int32, bits past 32 dropped as Kafka's `readVarint` does) or
/// varlong (10) from `b[*p..end]`.
#[inline(always)]
pub fn varint(b: &[u8], p: &mut usize, end: usize, max_bytes: u32) -> Res<i64> {
    let mut u: u64 = 0;
    for i in 0..max_bytes {
        if *p >= end { corrupt!("varint runs past the record"); }
        let c = b[*p];
        *p += 1;
        u |= ((c & 0x7f) as u64) << (7 * i);
        if c & 0x80 == 0 {
            if max_bytes == 5 { u &= 0xFFFF_FFFF; }
            return Ok((u >> 1) as i64 ^ -((u & 1) as i64));
        }
    }
    corrupt!("varint longer than {max_bytes} bytes")
}

/// One record of a batch's plain record bytes (Kafka's `DefaultRecord`): field positions only.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub start: usize,
    pub end: usize,
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    pub key: Option<(usize, usize)>,
    pub value: Option<(usize, usize)>,
    /// where the header count starts
    pub headers_at: usize,
}

impl Rec {
    pub fn has_no_headers(&self, b: &[u8]) -> bool { self.headers_at + 1 == self.end && b[self.headers_at] == 0 }
}

/// The record at `*pos`; moves `*pos` to its end. Checks the lengths and the field layout (the
/// header block is checked by `headers`, or by `check_headers` where they are not emitted).
#[inline(always)]
pub fn record(b: &[u8], pos: &mut usize) -> Res<Rec> {
    let n = b.len();
    let start = *pos;
    let mut p = start;
    let len = varint(b, &mut p, n, 5)?;
    if len < 0 || len as usize > n - p { corrupt!("record length {len} at {start} runs past the records"); }
    let end = p + len as usize;
    if p >= end { corrupt!("record at {start} has no attributes"); }
    p += 1; // attributes (int8, unused)
    let timestamp_delta = varint(b, &mut p, end, 10)?;
    let offset_delta = varint(b, &mut p, end, 5)?;
    let key = field(b, &mut p, end)?;
    let value = field(b, &mut p, end)?;
    if p >= end { corrupt!("record at {start} ends before its header count"); }
    *pos = end;
    Ok(Rec { start, end, timestamp_delta, offset_delta, key, value, headers_at: p })
}

#[inline(always)]
fn field(b: &[u8], p: &mut usize, end: usize) -> Res<Option<(usize, usize)>> {
    let l = varint(b, p, end, 5)?;
    if l == -1 { return Ok(None); }
    if l < 0 || l as usize > end - *p { corrupt!("field length {l} runs past the record"); }
    let at = *p;
    *p += l as usize;
    Ok(Some((at, l as usize)))
}

/// The headers of `r` as (UTF-8 key, value) pairs, all of them checked.
pub fn headers<'a>(b: &'a [u8], r: &Rec) -> Res<Vec<(&'a str, Option<&'a [u8]>)>> {
    let (mut p, end) = (r.headers_at, r.end);
    let count = varint(b, &mut p, end, 5)?;
    if count < 0 || count as usize > end - p { corrupt!("header count {count}"); }
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let kl = varint(b, &mut p, end, 5)?;
        if kl < 0 || kl as usize > end - p { corrupt!("header key length {kl}"); }
        let k = std::str::from_utf8(&b[p..p + kl as usize]).map_err(|e| Corrupt(format!("header key: {e}")))?;
        p += kl as usize;
        let v = field(b, &mut p, end)?.map(|(at, l)| &b[at..at + l]);
        out.push((k, v));
    }
    if p != end { corrupt!("headers end at {p}, the record at {end}"); }
    Ok(out)
}

/// Every record of a batch's plain bytes, checked as `decode_v2` checks them: the declared
/// count exactly, nothing left over, offset deltas of the first and last record within
/// 0..lastOffsetDelta. `f` sees each record (and may reject it).
pub fn walk<F: FnMut(usize, &Rec) -> Res<()>>(h: &Header, b: &[u8], with_headers: bool, mut f: F) -> Res<()> {
    if h.records_count == 0 { return Ok(()); } // Kafka: an empty batch's payload is not read
    let mut pos = 0usize;
    let (mut first, mut last) = (0i64, 0i64);
    for i in 0..h.records_count as usize {
        if pos >= b.len() { corrupt!("premature end after {i} of {} records", h.records_count); }
        let r = record(b, &mut pos)?;
        if with_headers && !r.has_no_headers(b) { headers(b, &r)?; }
        if i == 0 { first = r.offset_delta; }
        last = r.offset_delta;
        f(i, &r)?;
    }
    if pos != b.len() { corrupt!("{} bytes after {} records", b.len() - pos, h.records_count); }
    if first < 0 || last > h.last_offset_delta as i64 {
        corrupt!("offset deltas {first}..{last} outside 0..{}", h.last_offset_delta);
    }
    Ok(())
}

/// An upper bound for preallocation that no hostile count can inflate: a record takes at
/// least 7 bytes (found by fuzzing: a count of 2^31-1 once sized a 16 GB list).
pub fn capacity(h: &Header, b: &[u8]) -> usize { (h.records_count as usize).min(b.len() / 7 + 1) }

/// One record as the cleaner sees it (`storage_engine.record.v2.walk_records`): its span, its
/// deltas, its key and whether its value is null. Values and headers are not read.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub offset_delta: i64,
    pub timestamp_delta: i64,
    pub key: Option<(usize, usize)>,
    pub tombstone: bool,
}

/// `walk_records(buf, count, start, stop)` exactly: the same bytes accepted, the same spans.
///
/// It is looser than `walk` on purpose (the compaction reference reads only the fields its rules
/// need): varints are read up to the end of `b` (not of the record), a record must be at least
/// 6 bytes and end within `stop`, its key must end before the record does (at the value's
/// length, whose first byte 0x01 means a null value), offset deltas are not range-checked and
/// the value and headers are not parsed; the records must end exactly at `stop`. `count` <= 0
/// walks nothing. Accepting anything the reference rejects would be a divergence, so every
/// check of the reference is here and none more.
pub fn walk_spans(b: &[u8], count: i64, start: usize, stop: usize) -> Res<Vec<Span>> {
    // no hostile count sizes the list: a record takes at least 7 bytes
    let mut out = Vec::with_capacity((count.max(0) as usize).min(stop.saturating_sub(start) / 7 + 1));
    // one-byte varints (almost every length and delta of a record) without the general loop
    #[inline(always)]
    fn varint(b: &[u8], p: &mut usize, end: usize, max_bytes: u32) -> Res<i64> {
        match b.get(*p) {
            Some(&c) if c < 0x80 => {
                *p += 1;
                Ok((c >> 1) as i64 ^ -((c & 1) as i64))
            }
            _ => self::varint(b, p, end, max_bytes),
        }
    }
    let mut pos = start;
    let mut i = 0i64;
    while i < count {
        let mut p = pos;
        let length = varint(b, &mut p, b.len(), 5)?;
        if length < 6 || p + length as usize > stop { corrupt!("record length {length} at {pos} runs past the batch"); }
        let end = p + length as usize;
        p += 1; // attributes
        let timestamp_delta = varint(b, &mut p, b.len(), 10)?;
        let offset_delta = varint(b, &mut p, b.len(), 5)?;
        let kl = varint(b, &mut p, b.len(), 5)?;
        let key = if kl >= 0 {
            let at = p;
            p += kl as usize;
            Some((at, kl as usize))
        } else if kl == -1 {
            None
        } else {
            corrupt!("invalid key length {kl}")
        };
        if p >= end || p >= b.len() { corrupt!("record at {pos} ends inside its key"); }
        out.push(Span { start: pos, end, offset_delta, timestamp_delta, key, tombstone: b[p] == 1 });
        pos = end;
        i += 1;
    }
    if pos != stop { corrupt!("bytes after the declared {count} records"); }
    Ok(out)
}
