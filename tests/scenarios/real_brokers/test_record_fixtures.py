"""Segments written by real Kafka brokers (../shared/fixtures/real-kafka) decode as INVENTORY.md says.

The expected numbers are parsed from the inventory's markdown table, not copied here, so the
test follows the fixtures. Every listed file (.log, .log.swap, .log.deleted, KRaft .checkpoint)
is scanned, CRC-verified and fully decoded.
"""

from __future__ import annotations

import collections
import datetime
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from storage_engine.record import TimestampType, decode_batch, scan_batches, verify_batch
from tests.helpers.paths import REAL_KAFKA as ROOT

INVENTORY = ROOT / "INVENTORY.md"
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER"}


def inventory_rows() -> list[dict[str, str]]:
    """Rows of the per-file table (the one whose header starts ``| file | size |``)."""
    if not INVENTORY.is_file():
        return []
    rows, columns = [], None
    for line in INVENTORY.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == ["file", "size"]:
            columns = cells
        elif columns and not set(line) <= set("|-: "):
            rows.append(dict(zip(columns, cells, strict=False)))
    return rows


ROWS = inventory_rows()


@dataclass
class Decoded:
    size: int
    magics: set
    batches: int = 0
    records: int = 0
    offsets: list = None  # type: ignore[assignment]
    codecs: collections.Counter = None  # type: ignore[assignment]
    null_keys: int = 0
    tombstones: int = 0
    control_batches: int = 0
    txn_batches: int = 0
    producer_batches: int = 0
    headers: int = 0
    log_append_batches: int = 0
    control_types: collections.Counter = None  # type: ignore[assignment]
    timestamps: list = None  # type: ignore[assignment]


def decode_file(path: Path) -> Decoded:
    data = path.read_bytes()
    out = Decoded(len(data), set(), offsets=[], codecs=collections.Counter(), control_types=collections.Counter(), timestamps=[])
    for raw in scan_batches(data, path=str(path)):
        verify_batch(raw, path=str(path))
        records = decode_batch(raw, path=str(path))
        h = raw.header
        out.magics.add(h.magic)
        out.batches += 1
        out.records += len(records)
        out.codecs[h.compression.kafka_name] += 1
        out.control_batches += h.is_control
        out.txn_batches += h.is_transactional
        out.producer_batches += h.has_producer_id
        if h.timestamp_type is TimestampType.LOG_APPEND_TIME:
            out.log_append_batches += 1
            assert all(r.timestamp == h.max_timestamp for r in records)
        for r in records:
            out.offsets.append(r.offset)
            out.null_keys += r.key is None
            out.tombstones += r.value is None
            out.headers += len(r.headers)
            if h.is_control:
                out.control_types[CONTROL_TYPES[struct.unpack(">hh", r.key[:4])[1]]] += 1
            elif r.timestamp >= 0:
                out.timestamps.append(r.timestamp)
        assert [r.offset for r in records] == sorted(set(r.offset for r in records))
        if records:
            assert h.base_offset <= records[0].offset and records[-1].offset <= h.last_offset
        end = raw.position + h.size_in_bytes
    # The last batch ends exactly at the end of the file: nothing was skipped as a "partial tail".
    assert end == len(data)
    return out


def utc_day(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).date().isoformat()


def test_inventory_is_present(real_kafka: Path) -> None:
    assert ROWS, f"no per-file table found in {INVENTORY}"


@pytest.mark.parametrize("row", ROWS, ids=[r["file"].strip("`") for r in ROWS])
def test_fixture_file_matches_inventory(row: dict[str, str], real_kafka: Path) -> None:
    path = real_kafka / row["file"].strip("`")
    got = decode_file(path)
    assert got.size == int(row["size"])
    assert got.magics == {int(m) for m in re.findall(r"v(\d)", row["magic"])}
    assert got.batches == int(row["batches"])
    assert got.records == int(row["records"])
    first, last = (int(x) for x in re.split(r"[–-]", row["offsets"]))
    assert (min(got.offsets), max(got.offsets)) == (first, last)
    expected_codecs = {name: int(n) for name, n in re.findall(r"(\w+)×(\d+)", row["codecs"])}
    assert dict(got.codecs) == expected_codecs
    null_keys, non_null = (int(x) for x in row["keys null / non-null"].split("/"))
    assert (got.null_keys, got.records - got.null_keys) == (null_keys, non_null)
    assert got.tombstones == int(row["tombstones"])
    control, txn = (int(x) for x in row["control / txn batches"].split("/"))
    assert (got.control_batches, got.txn_batches) == (control, txn)

    notes = row["notes"]
    if m := re.search(r"control: ([^;]+)", notes):
        assert dict(got.control_types) == {k: int(v) for k, v in re.findall(r"(\w+)×(\d+)", m.group(1))}
    else:
        assert not got.control_types
    m = re.search(r"(\d+) headers", notes)
    assert got.headers == (int(m.group(1)) if m else 0)
    m = re.search(r"(\d+) batches with producerId", notes)
    if m:
        assert got.producer_batches == int(m.group(1))
    assert (got.log_append_batches > 0) == ("LogAppendTime" in notes)
    if "LogAppendTime" in notes:
        assert got.log_append_batches == got.batches
    if m := re.search(r"ts (\d{4}-\d\d-\d\d)\.\.(\d{4}-\d\d-\d\d)", notes):
        assert (utc_day(min(got.timestamps)), utc_day(max(got.timestamps))) == m.groups()


def test_inventory_totals(real_kafka: Path) -> None:
    text = INVENTORY.read_text(encoding="utf-8")
    m = re.search(r"Totals: (\d+) files, (\d+) bytes, (\d+) batches, (\d+) records", text)
    assert m, "totals line missing"
    files, size, batches, records = (int(x) for x in m.groups())
    decoded = [decode_file(real_kafka / r["file"].strip("`")) for r in ROWS]
    assert len(decoded) == files
    assert sum(d.size for d in decoded) == size
    assert sum(d.batches for d in decoded) == batches
    assert sum(d.records for d in decoded) == records
