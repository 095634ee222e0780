//! lz4 and zstd decompression of a v2 batch's records inside the core, free of PyO3 (fuzzable).
//!
//! The reference (`storage_engine/record/compression.py`) decompresses with `lz4.frame` (liblz4
//! 1.9.4) and `zstandard` (libzstd 1.5.7), frame after frame. Here the same streams are read
//! natively into a buffer the caller reuses, without the GIL and without a Python `bytes` of the
//! plain records. The rule that keeps both cores alike: this code may *refuse* anything (the
//! caller then runs the reference's `decompress`, whose result or error is used), but what it
//! *accepts* must be accepted by the reference with the same bytes out. So:
//!
//! * zstd runs libzstd 1.5.7 itself (zstd-safe, vendored: the reference's version, its default
//!   window limit, legacy formats left out) in the reference's loop: one streaming session per
//!   frame (`decompressobj`), the next frame started on the bytes left over, until none are
//!   left; a stream that ends inside a frame or a libzstd error is refused.
//! * lz4 is read by a frame parser and block decoder of our own that accept a strict subset of
//!   what liblz4's `LZ4F_decompress` accepts: standard frames (magic 0x184D2204, version 01,
//!   reserved bits clear, header checksum right) with independent blocks, no dictionary id, any
//!   of the 64 KB..4 MB block sizes, block and content checksums verified (xxHash32), a content
//!   size (when given, non-zero) matched exactly, concatenated frames each starting with the
//!   magic (the reference's rule for bytes after a frame). A block must end the way LZ4's block
//!   format requires and liblz4 checks (a last sequence of literals that ends the block's bytes
//!   exactly; no match ending in the last 5 bytes of the block's capacity; offsets 1..output
//!   so far), with margins where liblz4's bounds are subtle (its length-byte input limits). Linked blocks, skippable frames,
//!   legacy frames and Kafka 0.8's wrong header checksum are refused (the reference reads them).
//!
//! Neither decoder sizes anything from a size the stream declares: the output grows as bytes are
//! produced. The reference has no cap of its own (`zstandard`'s `decompressobj` and `lz4.frame`
//! grow their output until the stream ends), so a stream that would pass [`MAX_PLAIN`] (the most
//! a v2 batch's records can address: Kafka sizes a batch with an int32) is refused and the
//! reference decides; the core never holds more than the reference would.
use std::cell::RefCell;

use twox_hash::XxHash32;
use zstd_safe::{DCtx, InBuffer, OutBuffer, ResetDirective};

/// The most plain record bytes the core decompresses one batch to (see the module doc).
pub const MAX_PLAIN: usize = i32::MAX as usize;

/// Attribute codec ids (`CompressionType.java`).
pub const LZ4: i16 = 3;
pub const ZSTD: i16 = 4;

/// The stream is not one this module accepts: the reference's `decompress` reads it instead.
#[derive(Debug)]
pub struct Refused;

type Out<T> = Result<T, Refused>;

/// Decompresses `input` (a batch's bytes after its header, codec `codec`) into `out`: the
/// plain records are `out[..n]` for the returned `n` (bytes after them are scratch: the lz4
/// decoder keeps `out` initialized to its high-water mark rather than zeroing it per batch).
/// `Err(Refused)` for gzip and snappy, which stay in Python.
pub fn decompress(codec: i16, input: &[u8], out: &mut Vec<u8>) -> Out<usize> {
    match codec {
        LZ4 => lz4_frames(input, out),
        ZSTD => {
            out.clear();
            zstd_frames(input, out)?;
            Ok(out.len())
        }
        _ => Err(Refused),
    }
}

/// Whether this module decompresses `codec` (else the caller decompresses in Python).
pub fn native(codec: i16) -> bool { codec == LZ4 || codec == ZSTD }

thread_local! {
    /// The decompression buffer a thread reuses from batch to batch (taken, not borrowed, so a
    /// call re-entered from Python during record building gets a fresh one).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer larger than this is not kept for the next batch (one huge batch would pin it).
const KEEP: usize = 16 << 20;

/// The thread's reusable decompression buffer (empty, capacity kept).
pub fn take_scratch() -> Vec<u8> { SCRATCH.with(|c| c.take()) }

/// Returns a buffer from [`take_scratch`] for the next batch.
pub fn give_back(v: Vec<u8>) {
    if v.capacity() <= KEEP { SCRATCH.with(|c| *c.borrow_mut() = v); }
}

// --- zstd ----------------------------------------------------------------------------------

thread_local! {
    /// One libzstd context per thread, reused (creating one costs ~100 KB of tables).
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// How much room to add to the output before each `ZSTD_decompressStream` step: one block
/// (libzstd's `ZSTD_BLOCKSIZE_MAX`), so a step makes progress without a large guess.
const ZSTD_STEP: usize = 128 * 1024;

fn zstd_frames(input: &[u8], out: &mut Vec<u8>) -> Out<()> {
    DCTX.with(|cell| {
        let mut cell = cell.borrow_mut();
        let dctx = cell.get_or_insert_with(DCtx::create);
        let mut rest = input;
        // The reference: `decompressobj().decompress(rest)` per frame, until nothing is left; an
        // empty payload is "truncated" there, so it is refused here.
        loop {
            dctx.reset(ResetDirective::SessionOnly).map_err(|_| Refused)?;
            let mut inb = InBuffer::around(rest);
            loop {
                if out.capacity() - out.len() < ZSTD_STEP {
                    if out.len() >= MAX_PLAIN { return Err(Refused); }
                    out.reserve(ZSTD_STEP.max(out.len() / 2));
                }
                let pos = out.len();
                let mut outb = OutBuffer::around_pos(out, pos);
                let r = dctx.decompress_stream(&mut outb, &mut inb).map_err(|_| Refused)?;
                let (produced, consumed) = (outb.pos(), inb.pos());
                if produced > MAX_PLAIN { return Err(Refused); }
                if r == 0 { break; } // the frame is complete
                if consumed == rest.len() && produced == pos {
                    return Err(Refused); // input used up inside a frame: truncated
                }
            }
            rest = &rest[inb.pos()..];
            if rest.is_empty() { return Ok(()); }
        }
    })
}

// --- lz4 -----------------------------------------------------------------------------------

const LZ4_MAGIC: u32 = 0x184D_2204;

fn le32(b: &[u8], at: usize) -> Out<u32> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes(s.try_into().unwrap())).ok_or(Refused)
}

fn lz4_frames(input: &[u8], out: &mut Vec<u8>) -> Out<usize> {
    let (mut pos, mut op) = (0, 0);
    loop {
        (pos, op) = lz4_frame(input, pos, out, op)?;
        if pos == input.len() { return Ok(op); }
        // bytes after a frame: another frame (a wrong magic is the reference's error)
    }
}

/// Room past a block's output for the decoder's fixed-size copies (which may write up to 15
/// bytes beyond what a sequence produces; those bytes are overwritten or left past the end).
const SLACK: usize = 64;

/// One frame at `input[at..]`, written to `out` from `op`; returns where it ends in `input` and
/// in `out`.
fn lz4_frame(input: &[u8], at: usize, out: &mut Vec<u8>, mut op: usize) -> Out<(usize, usize)> {
    if le32(input, at)? != LZ4_MAGIC { return Err(Refused); }
    let (flg, bd) = (*input.get(at + 4).ok_or(Refused)?, *input.get(at + 5).ok_or(Refused)?);
    let independent = flg & 0x20 != 0;
    let block_checksum = flg & 0x10 != 0;
    let has_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let dict_id = flg & 0x01 != 0;
    if flg >> 6 != 1 || flg & 0x02 != 0 || !independent || dict_id || bd & 0x8F != 0 { return Err(Refused); }
    let size_id = (bd >> 4) & 7;
    if size_id < 4 { return Err(Refused); }
    let max_block = 1usize << (8 + 2 * size_id as usize); // 4: 64 KB .. 7: 4 MB
    let hc_at = at + 6 + if has_size { 8 } else { 0 };
    let hc = *input.get(hc_at).ok_or(Refused)?;
    if (XxHash32::oneshot(0, &input[at + 4..hc_at]) >> 8) as u8 != hc { return Err(Refused); }
    let declared = if has_size {
        let v = u64::from_le_bytes(input[at + 6..at + 14].try_into().unwrap());
        if v == 0 { return Err(Refused); } // liblz4 reads 0 as "unknown": not checked there
        Some(v)
    } else {
        None
    };
    let start = op;
    let mut p = hc_at + 1;
    loop {
        let word = le32(input, p)?;
        p += 4;
        if word == 0 { break; } // EndMark
        let size = (word & 0x7FFF_FFFF) as usize;
        if size == 0 || size > max_block { return Err(Refused); }
        let block = input.get(p..p + size).ok_or(Refused)?;
        p += size;
        if block_checksum {
            if le32(input, p)? != XxHash32::oneshot(0, block) { return Err(Refused); }
            p += 4;
        }
        if op + max_block > MAX_PLAIN { return Err(Refused); }
        // never more room than the block can fill (LZ4 expands at most ~255x): no size read
        // from the stream sizes the buffer
        let room = if word & 0x8000_0000 != 0 { size } else { max_block.min(size.saturating_mul(255)) };
        if out.len() < op + room + SLACK { out.resize(op + room + SLACK, 0); }
        if word & 0x8000_0000 != 0 {
            out[op..op + size].copy_from_slice(block);
            op += size;
        } else {
            op = lz4_block(block, out, op, max_block)?;
        }
    }
    if content_checksum {
        if le32(input, p)? != XxHash32::oneshot(0, &out[start..op]) { return Err(Refused); }
        p += 4;
    }
    if declared.is_some_and(|d| d != (op - start) as u64) { return Err(Refused); }
    Ok((p, op))
}

/// One independent LZ4 block (LZ4's block format) written to `d` from `base`, at most
/// `capacity` bytes; returns where its output ends. `d` has room for what the block can fill
/// plus [`SLACK`].
///
/// Accepts only blocks liblz4's `LZ4_decompress_safe(src, dst, n, capacity)` (what
/// `LZ4F_decompress` calls per block) accepts with the same output:
/// * a sequence whose literals end within the block's last 8 bytes, or within the last 12 of
///   the capacity, must be the last: its literals end the block's bytes exactly (liblz4's
///   end-of-block condition);
/// * otherwise a 2-byte offset follows, 1..output so far (offset 0, invalid by the format, is
///   refused), and the match may not end within the last 5 bytes of the capacity (LZ4's
///   LASTLITERALS, liblz4's check);
/// * length extension bytes are read only where liblz4 reads them without its input-limit
///   error (literals before the last 15 bytes, matches before the last 5).
fn lz4_block(src: &[u8], d: &mut [u8], base: usize, capacity: usize) -> Out<usize> {
    let n = src.len();
    // the block's own room (`d` may be shorter than the capacity when the block is small)
    let oend = base + capacity;
    let limit = d.len() - SLACK;
    let mut ip = 0usize;
    let mut op = base;
    loop {
        let token = *src.get(ip).ok_or(Refused)?;
        ip += 1;
        let mut lit = (token >> 4) as usize;
        if lit < 15 && token & 15 < 15 && ip + 32 <= n && op + 64 <= oend.min(limit) {
            // the common sequence far from both ends (literals < 15, match < 19 bytes): the
            // checks below all pass for it (not the last sequence; no length bytes; room for
            // the match), so only the offset is checked; fixed-size copies
            let lits: &[u8; 16] = src[ip..ip + 16].try_into().unwrap();
            d[op..op + 16].copy_from_slice(lits);
            op += lit;
            ip += lit;
            let offset = u16::from_le_bytes([src[ip], src[ip + 1]]) as usize;
            ip += 2;
            if offset == 0 || offset > op - base { return Err(Refused); }
            let ml = (token & 15) as usize + 4;
            if offset >= 18 {
                let from = op - offset;
                d.copy_within(from..from + 18, op);
            } else {
                copy_match(d, op, offset, ml);
            }
            op += ml;
            continue;
        }
        if lit == 15 {
            loop {
                if ip + 15 >= n { return Err(Refused); }
                let s = src[ip];
                ip += 1;
                lit += s as usize;
                if s != 255 { break; }
            }
        }
        let cpy = op + lit;
        if ip + lit + 8 > n || cpy + 12 > oend {
            // the last sequence: literals only, to the block's last byte
            if ip + lit != n || cpy > oend || cpy > limit { return Err(Refused); }
            d[op..cpy].copy_from_slice(&src[ip..n]);
            return Ok(cpy);
        }
        if cpy + 12 > limit { return Err(Refused); } // cannot happen: `d` holds 255x the input
        if ip + lit + 16 <= n {
            // 16-byte steps (fixed-size copies, no memcpy call): may copy up to 15 bytes past
            // the literals, from the block's own bytes into the room past `cpy`
            let mut i = 0;
            while i < lit {
                d[op + i..op + i + 16].copy_from_slice(&src[ip + i..ip + i + 16]);
                i += 16;
            }
        } else {
            d[op..cpy].copy_from_slice(&src[ip..ip + lit]);
        }
        op = cpy;
        ip += lit;
        let offset = u16::from_le_bytes([src[ip], src[ip + 1]]) as usize;
        ip += 2;
        if offset == 0 || offset > op - base { return Err(Refused); }
        let mut ml = (token & 15) as usize;
        if ml == 15 {
            loop {
                if ip + 5 >= n { return Err(Refused); }
                let s = src[ip];
                ip += 1;
                ml += s as usize;
                if s != 255 { break; }
            }
        }
        ml += 4;
        if op + ml + 5 > oend || op + ml > limit { return Err(Refused); } // the last 5 bytes are literals
        copy_match(d, op, offset, ml);
        op += ml;
    }
}

/// Writes `len` bytes at `op` copied from `offset` bytes back, as LZ4 defines it (a copy that
/// overlaps what it writes repeats the last `offset` bytes). May write up to 15 bytes past
/// `op + len` (within [`SLACK`]).
#[inline(always)]
fn copy_match(d: &mut [u8], op: usize, offset: usize, len: usize) {
    let from = op - offset;
    if offset >= 16 {
        // 16-byte steps: each reads bytes already written (offset >= 16)
        let mut i = 0;
        while i < len {
            d.copy_within(from + i..from + i + 16, op + i);
            i += 16;
        }
    } else if offset >= 8 {
        // 8-byte steps: each reads bytes already written (offset >= 8)
        let mut i = 0;
        while i < len {
            d.copy_within(from + i..from + i + 8, op + i);
            i += 8;
        }
    } else {
        for i in 0..len { d[op + i] = d[from + i]; }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_match_repeats_the_pattern() {
        let mut d = [0u8; 80];
        d[..2].copy_from_slice(b"ab");
        copy_match(&mut d, 2, 2, 7);
        assert_eq!(&d[..9], b"ababababa");
        let mut d = [0u8; 80];
        d[..10].copy_from_slice(b"0123456789");
        copy_match(&mut d, 10, 9, 20);
        assert_eq!(&d[..30], b"012345678912345678912345678912");
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        let mut out = Vec::new();
        assert!(decompress(1, b"\x1f\x8b", &mut out).is_err());
        assert!(decompress(LZ4, b"", &mut out).is_err());
        assert!(decompress(ZSTD, b"", &mut out).is_err());
        assert!(decompress(LZ4, b"\x04\x22\x4d\x18\x60\x40", &mut out).is_err());
    }
}
