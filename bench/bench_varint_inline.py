"""Why the codec's hot loops inline their varints instead of calling one shared helper.

    .venv/bin/python bench/bench_varint_inline.py [--records 1000] [--repeat 25]

``duplicates`` reports the varint blocks repeated inside ``v2.walk_records`` (the compaction's
record walk) and ``v2_builder.encode_batch`` (the record loop) as copies. This measures, in one
run, the loop as written against the same loop with every varint going through one shared
helper, the fastest form a helper can take (its own one- and two-byte fast paths, then the
checked decoder):

* walk: ``v2.walk_records`` over the plain records of one batch, against the same walk with a
  helper call per field;
* encode: the builder's per-record varint fields (``enc(d) or encode_varint(d)`` inline),
  against a helper call per field.

Records carry 16-byte keys, 100-byte values and timestamps one second apart, so timestamp
deltas take three bytes and the helper's slow path is exercised too. A ratio above 1.0 means
the helper loses speed; the inlined blocks stay while it does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_codec import best_rates  # noqa: E402

from storage_engine.record import Record, encode_batch  # noqa: E402
from storage_engine.record.v2 import _ZZ1, _ZZ2, RECORD_BATCH_OVERHEAD, walk_records  # noqa: E402
from storage_engine.record.v2_builder import _ENC  # noqa: E402
from storage_engine.record.varint import decode_varint, decode_varlong, encode_varint, encode_varlong  # noqa: E402


def _read(buf: bytes, p: int, slow) -> tuple[int, int]:
    """The shared helper: one varint at ``p`` with the loop's fast paths, then the checked one."""
    b = buf[p]
    if b < 128:
        return _ZZ1[b], p + 1
    b2 = buf[p + 1]
    if b2 < 128:
        return _ZZ2[b2][b], p + 2
    return slow(buf, p)


def walk_with_helper(buf: bytes, count: int, start: int) -> list[tuple]:
    """``walk_records`` with every varint through :func:`_read` (same output)."""
    out = []
    pos = start
    n = len(buf)
    for _ in range(count):
        length, p = _read(buf, pos, decode_varint)
        rec_end = p + length
        if rec_end > n or length < 6:
            raise ValueError(f"record length {length} at {pos} runs past the batch")
        tsd, p = _read(buf, p + 1, decode_varlong)
        od, p = _read(buf, p, decode_varint)
        kl, p = _read(buf, p, decode_varint)
        key = buf[p:p + kl] if kl >= 0 else None
        p += max(kl, 0)
        vl, p = _read(buf, p, decode_varint)
        out.append((pos, rec_end, od, tsd, key, vl < 0))
        pos = rec_end
    return out


def fields_inline(records: list[Record], base_ts: int, base_offset: int) -> list[bytes]:
    """The builder's varint fields per record, inline as ``encode_batch`` writes them."""
    enc = _ENC.get
    out = []
    for r in records:
        d = r.timestamp - base_ts
        ts_b = enc(d) or encode_varlong(d)
        d = r.offset - base_offset
        off_b = enc(d) or encode_varint(d)
        d = len(r.key)
        key_b = enc(d) or encode_varint(d)
        d = len(r.value)
        out.append(ts_b + off_b + key_b + (enc(d) or encode_varint(d)))
    return out


def _varint(d: int, slow=encode_varint) -> bytes:
    return _ENC.get(d) or slow(d)


def fields_with_helper(records: list[Record], base_ts: int, base_offset: int) -> list[bytes]:
    """The same fields through one helper call each."""
    out = []
    for r in records:
        out.append(_varint(r.timestamp - base_ts, encode_varlong) + _varint(r.offset - base_offset)
                   + _varint(len(r.key)) + _varint(len(r.value)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()
    records = [Record(i, 1_700_000_000_000 + i * 1000, b"user-%011d" % i, b"v" * 100) for i in range(args.records)]
    batch = encode_batch(records, base_offset=0)
    n = args.records
    assert walk_with_helper(batch, n, RECORD_BATCH_OVERHEAD) == walk_records(batch, n, RECORD_BATCH_OVERHEAD)
    base_ts = records[0].timestamp
    assert fields_inline(records, base_ts, 0) == fields_with_helper(records, base_ts, 0)
    walk = best_rates([lambda: walk_records(batch, n, RECORD_BATCH_OVERHEAD),
                       lambda: walk_with_helper(batch, n, RECORD_BATCH_OVERHEAD)], n, args.repeat)
    fields = best_rates([lambda: fields_inline(records, base_ts, 0),
                         lambda: fields_with_helper(records, base_ts, 0)], n, args.repeat)
    print(f"{'loop':<8} {'inline rec/s':>14} {'helper rec/s':>14} {'helper slower by':>17}   goal")
    for name, (inline, helper) in (("walk", walk), ("encode", fields)):
        print(f"{name:<8} {inline:>14,.0f} {helper:>14,.0f} {inline / helper:>16.2f}x   "
              f"a shared helper only if <= 1.00x")


if __name__ == "__main__":
    main()
