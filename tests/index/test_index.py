"""Offset and time indexes (spec 1.8-1.10), after Kafka's OffsetIndexTest and TimeIndexTest."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine.errors import CorruptIndexError, LogError
from storage_engine.index import (
    IndexOffsetOverflowError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

REAL_KAFKA = Path("/work/shared/fixtures/real-kafka")
BASE = 45


def offset_index(tmp_path: Path, max_entries: int = 30, **kw: object) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000000045.index", BASE, max_entries * 8, **kw)  # type: ignore[arg-type]


def time_index(tmp_path: Path, max_entries: int = 30, **kw: object) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, max_entries * 12, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- offset index


def test_lookup_empty(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    assert idx.lookup(BASE) == OffsetPosition(BASE, 0)
    assert idx.lookup(10**12) == OffsetPosition(BASE, 0)
    assert idx.entries == 0 and idx.last_offset == BASE


def test_lookup_extreme_cases(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    for i in range(1, 6):
        idx.append(BASE + i * 10, i * 100)
    assert idx.lookup(BASE) == OffsetPosition(BASE, 0)  # below the first entry
    assert idx.lookup(BASE + 9) == OffsetPosition(BASE, 0)
    assert idx.lookup(BASE + 10) == OffsetPosition(BASE + 10, 100)  # exact
    assert idx.lookup(BASE + 19) == OffsetPosition(BASE + 10, 100)
    assert idx.lookup(BASE + 50) == OffsetPosition(BASE + 50, 500)
    assert idx.lookup(2**63 - 1) == OffsetPosition(BASE + 50, 500)
    assert idx.lookup(0) == OffsetPosition(BASE, 0)


@given(st.lists(st.integers(min_value=1, max_value=10**6), unique=True, max_size=60), st.data())
@settings(max_examples=60, deadline=None)
def test_random_lookup_matches_a_model(tmp_path_factory: pytest.TempPathFactory, rels: list[int], data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("idx") / "0.index"
    idx = OffsetIndex(path, BASE, 100 * 8)
    model = [(BASE + r, (i + 1) * 7) for i, r in enumerate(sorted(rels))]
    for off, pos in model:
        idx.append(off, pos)
    for target in data.draw(st.lists(st.integers(min_value=0, max_value=BASE + 10**6 + 5), max_size=20)):
        below = [e for e in model if e[0] <= target]
        expected = OffsetPosition(*below[-1]) if below else OffsetPosition(BASE, 0)
        assert idx.lookup(target) == expected
    reopened = OffsetIndex(path, BASE, writable=False)  # untrimmed file, zero tail
    assert [reopened.entry(i) for i in range(reopened.entries)] == [OffsetPosition(*e) for e in model]


def test_entries_are_big_endian_relative(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(BASE + 3, 4096)
    idx.close()
    assert idx.path.read_bytes() == struct.pack(">ii", 3, 4096)


def test_entry(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(BASE + 1, 10)
    assert idx.entry(0) == OffsetPosition(BASE + 1, 10)
    with pytest.raises(IndexError):
        idx.entry(1)


def test_append_out_of_order(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(51, 10)
    with pytest.raises(InvalidOffsetError) as info:
        idx.append(50, 20)
    assert "50" in str(info.value) and "51" in str(info.value) and str(idx.path) in str(info.value)
    with pytest.raises(InvalidOffsetError):
        idx.append(51, 20)  # equal is not larger
    assert isinstance(info.value, LogError)
    assert idx.entries == 1


def test_append_overflow(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 10)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE - 1, 10)
    idx.append(BASE + 2**31 - 1, 10)
    assert idx.last_offset == BASE + 2**31 - 1


def test_append_too_many(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_entries=5)
    for i in range(1, 6):
        idx.append(BASE + i, i)
    assert idx.is_full
    with pytest.raises(LogError, match=r"Attempt to append to a full index \(size = 5\)\."):
        idx.append(BASE + 6, 6)


def test_invalid_max_size(tmp_path: Path) -> None:
    with pytest.raises(LogError, match="Invalid max index size: 7"):
        OffsetIndex(tmp_path / "x.index", 0, 7)
    idx = OffsetIndex(tmp_path / "x.index", 0, 8 * 3 + 5)
    assert idx.max_entries == 3  # rounded down to whole entries


def test_default_sizes(tmp_path: Path) -> None:
    assert OffsetIndex(tmp_path / "a.index", 0).max_entries == 1310720
    t = TimeIndex(tmp_path / "a.timeindex", 0)
    assert t.max_entries == 873813
    t.maybe_append(5, 1)
    assert os.path.getsize(t.path) == 10485756


def test_fetch_upper_bound_offset(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    for i in range(1, 5):
        idx.append(BASE + i * 10, i * 100)
    assert idx.fetch_upper_bound_offset(0, 100) == OffsetPosition(BASE + 10, 100)
    assert idx.fetch_upper_bound_offset(100, 150) == OffsetPosition(BASE + 30, 300)
    assert idx.fetch_upper_bound_offset(300, 100) == OffsetPosition(BASE + 40, 400)
    assert idx.fetch_upper_bound_offset(300, 101) is None


def test_truncate(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    for i in range(1, 11):
        idx.append(BASE + i, i * 10)
    idx.truncate_to(BASE + 11)  # beyond the end: nothing removed
    assert idx.entries == 10
    idx.truncate_to(BASE + 9)  # exact match is removed too
    assert idx.entries == 8 and idx.last_offset == BASE + 8
    assert idx.lookup(BASE + 100) == OffsetPosition(BASE + 8, 80)
    idx.truncate_to(BASE + 5)
    assert idx.entries == 4
    idx.truncate_to(BASE)
    assert idx.entries == 0 and idx.lookup(BASE + 100) == OffsetPosition(BASE, 0)
    idx.append(BASE + 3, 30)  # appends continue after a truncation
    assert idx.lookup(BASE + 100) == OffsetPosition(BASE + 3, 30)


def test_truncate_between_entries_and_reopen(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    for i in range(1, 11):
        idx.append(BASE + i * 2, i * 10)
    idx.truncate_to(BASE + 7)  # removes 8, 10, ...
    assert idx.last_offset == BASE + 6
    # the dropped slots read as zero tail, so another reader sees the same entries
    other = OffsetIndex(idx.path, BASE, writable=False)
    assert other.entries == 3 and other.last_offset == BASE + 6
    other.sanity_check()


def test_reopen_after_trim(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    entries = [(BASE + 1, 0), (BASE + 3, 50), (BASE + 7, 120)]
    for off, pos in entries:
        idx.append(off, pos)
    idx.close()
    assert os.path.getsize(idx.path) == 3 * 8  # trimmed on close
    ro = OffsetIndex(idx.path, BASE, 30 * 8, writable=False)
    assert ro.entries == 3 and ro.max_entries == 3 and ro.is_full
    assert [ro.entry(i) for i in range(3)] == [OffsetPosition(*e) for e in entries]
    assert ro.lookup(BASE + 4) == OffsetPosition(BASE + 3, 50)
    ro.sanity_check()
    # a writable reopen is full until the loader resizes it (Kafka's resizeIndexes)
    rw = OffsetIndex(idx.path, BASE, 30 * 8)
    with pytest.raises(LogError, match="full"):
        rw.append(BASE + 9, 200)
    assert rw.resize(30 * 8) is True
    rw.append(BASE + 9, 200)
    assert rw.entries == 4 and os.path.getsize(rw.path) == 30 * 8


def test_single_entry_at_position_zero_survives_trim(tmp_path: Path) -> None:
    # Kafka's testSanityLastOffsetEqualToBaseOffset appends (base, 0)
    idx = offset_index(tmp_path)
    idx.append(BASE, 0)
    idx.sanity_check()
    idx.close()
    ro = OffsetIndex(idx.path, BASE, writable=False)
    assert ro.entries == 1 and ro.entry(0) == OffsetPosition(BASE, 0)


def test_untrimmed_preallocated_file_with_zero_tail(tmp_path: Path) -> None:
    writer = offset_index(tmp_path, max_entries=1000)
    for i in range(1, 8):
        writer.append(BASE + i * 3, i * 64)
    writer.flush()
    assert os.path.getsize(writer.path) == 8000  # still preallocated: the active segment
    reader = OffsetIndex(writer.path, BASE, writable=False)
    assert reader.entries == 7 and reader.last_offset == BASE + 21
    assert reader.lookup(BASE + 100) == OffsetPosition(BASE + 21, 7 * 64)
    reader.sanity_check()
    writer.append(BASE + 30, 1000)
    assert reader.entries == 7
    assert OffsetIndex(writer.path, BASE, writable=False).entries == 8  # a reader opened later sees it


def test_zero_tail_of_a_crash_written_without_holes(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    body = struct.pack(">ii", 4, 100) + struct.pack(">ii", 9, 200)
    path.write_bytes(body + bytes(8 * 50))  # zeros really written, as Kafka's fixtures are
    idx = OffsetIndex(path, 0, writable=False)
    assert idx.entries == 2 and idx.last_offset == 9
    idx.sanity_check()
    empty = tmp_path / "1.index"
    empty.write_bytes(bytes(8 * 50))
    assert OffsetIndex(empty, 0, writable=False).entries == 0


def test_lazy_creation(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    assert not idx.exists()
    assert idx.lookup(BASE + 5) == OffsetPosition(BASE, 0)
    assert idx.entries == 0 and not idx.is_full
    idx.flush()
    idx.close()
    assert not idx.exists()  # reading, flushing and closing an unused index create nothing
    idx.append(BASE + 1, 10)
    assert idx.exists() and os.path.getsize(idx.path) == 30 * 8  # preallocated
    ro = OffsetIndex(tmp_path / "absent.index", 0, writable=False)
    assert ro.entries == 0
    with pytest.raises(LogError, match="read-only"):
        ro.append(1, 1)
    assert not ro.exists()


def test_roll_creates_a_trimmed_file(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.trim_to_valid_size()  # what a roll does for a segment that never indexed anything
    assert idx.exists() and os.path.getsize(idx.path) == 0


def test_construction_is_cheap(tmp_path: Path) -> None:
    for i in range(2000):
        OffsetIndex(tmp_path / f"{i}.index", i)
    assert list(tmp_path.iterdir()) == []


def test_reset_and_resize(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    for i in range(1, 4):
        idx.append(BASE + i, i)
    idx.trim_to_valid_size()
    assert os.path.getsize(idx.path) == 24
    idx.reset()
    assert idx.entries == 0 and os.path.getsize(idx.path) == 240
    assert OffsetIndex(idx.path, BASE, writable=False).entries == 0
    for i in range(1, 4):
        idx.append(BASE + i, i)
    assert idx.resize(16) is True and idx.max_entries == 3 and idx.is_full  # never below its entries: full
    assert idx.resize(29) is False and idx.max_entries == 3  # rounded down to entries
    assert idx.resize(24) is False
    time_index = TimeIndex(tmp_path / "t.timeindex", BASE, 120)
    for i in range(1, 4):
        time_index.maybe_append(100 + i, BASE + i)
    time_index.resize(12)  # below its entries: they stay, with the slot a roll's last entry takes
    assert time_index.max_entries == 4 and time_index.is_full
    time_index.maybe_append(200, BASE + 9, skip_full_check=True)
    time_index.maybe_append(200, BASE + 9, skip_full_check=True)  # a roll asks again: nothing to add
    assert time_index.entries == 4


def test_rename_and_delete(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(BASE + 1, 10)
    new = tmp_path / "00000000000000000045.index.deleted"
    idx.rename_to(new)
    assert idx.path == new and new.exists()
    idx.append(BASE + 2, 20)  # the open descriptor follows the file
    idx.close()
    assert OffsetIndex(new, BASE, writable=False).entries == 2
    # a caller that moved the file already: only the path changes
    moved = tmp_path / "moved.index"
    os.replace(new, moved)
    idx.rename_to(moved)
    assert idx.path == moved
    assert idx.delete() is True and not moved.exists()
    assert idx.delete() is False


def test_sanity_check_bad_length(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">ii", 1, 10) + b"\x00\x00\x01")
    with pytest.raises(CorruptIndexError) as info:
        OffsetIndex(path, 0, writable=False).sanity_check()
    assert str(path) in str(info.value) and "11 bytes" in str(info.value)


def test_sanity_check_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">ii", -5, 10))
    with pytest.raises(CorruptIndexError, match="less than the base offset"):
        OffsetIndex(path, 100, writable=False).sanity_check()


def test_sanity_check_garbage_after_entries(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(struct.pack(">iiiiii", 5, 10, 3, 20, 0, 0))  # offsets go backwards
    idx = OffsetIndex(path, 0, writable=False)
    assert idx.entries == 1
    with pytest.raises(CorruptIndexError, match="non-zero byte in the entry at position 8"):
        idx.sanity_check()


# --------------------------------------------------------------------------- time index


def test_time_lookup(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    assert t.lookup(100) == TimestampOffset(-1, BASE)
    for i in range(1, 10):
        t.maybe_append(i * 10, BASE + i * 2)
    assert t.lookup(5) == TimestampOffset(-1, BASE)
    assert t.lookup(10) == TimestampOffset(10, BASE + 2)
    assert t.lookup(15) == TimestampOffset(10, BASE + 2)
    assert t.lookup(90) == TimestampOffset(90, BASE + 18)
    assert t.lookup(10**15) == TimestampOffset(90, BASE + 18)


def test_time_entry_and_last_entry(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    assert t.last_entry() == TimestampOffset(-1, BASE) and t.last_offset == BASE
    t.maybe_append(100, BASE + 1)
    t.maybe_append(200, BASE + 3)
    assert t.entry(1) == TimestampOffset(200, BASE + 3)
    assert t.last_entry() == TimestampOffset(200, BASE + 3)
    with pytest.raises(IndexError):
        t.entry(2)


def test_time_bytes(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    t.maybe_append(1_700_000_000_000, BASE + 7)
    t.close()
    assert t.path.read_bytes() == struct.pack(">qi", 1_700_000_000_000, 7)


def test_maybe_append_rules(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    t.maybe_append(-1, BASE)  # not above the empty index's -1: ignored
    assert t.entries == 0
    t.maybe_append(0, BASE)  # (0, base) is a real entry
    t.maybe_append(100, BASE + 5)
    t.maybe_append(100, BASE + 6)  # equal timestamp: ignored
    assert t.entries == 2 and t.last_entry() == TimestampOffset(100, BASE + 5)
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(200, BASE + 4)
    with pytest.raises(LogError, match="timestamp"):
        t.maybe_append(50, BASE + 10)
    t.maybe_append(150, BASE + 5)  # same offset, larger timestamp: allowed
    with pytest.raises(IndexOffsetOverflowError):
        t.maybe_append(300, BASE + 2**31)
    assert t.entries == 3


def test_time_index_full_keeps_one_slot(tmp_path: Path) -> None:
    t = time_index(tmp_path, max_entries=5)
    for i in range(1, 5):
        t.maybe_append(i * 10, BASE + i)
    assert t.entries == 4 and t.is_full
    with pytest.raises(LogError, match="full"):
        t.maybe_append(50, BASE + 5)
    t.maybe_append(50, BASE + 5, skip_full_check=True)  # the roll entry
    assert t.entries == 5
    with pytest.raises(LogError, match="full"):
        t.maybe_append(60, BASE + 6, skip_full_check=True)


def test_time_truncate(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    for i in range(1, 11):
        t.maybe_append(i * 100, BASE + i * 2)
    t.truncate_to(BASE + 10)
    assert t.entries == 4 and t.last_entry() == TimestampOffset(400, BASE + 8)
    t.truncate_to(BASE + 9)
    assert t.entries == 4
    t.truncate_to(BASE + 8)
    assert t.entries == 3
    assert TimeIndex(t.path, BASE, writable=False).entries == 3
    t.truncate_to(0)
    assert t.entries == 0 and t.last_entry() == TimestampOffset(-1, BASE)
    t.maybe_append(5, BASE + 1)  # after truncation any timestamp above -1 goes in
    assert t.entries == 1


def test_time_reopen_after_trim_and_untrimmed(tmp_path: Path) -> None:
    t = time_index(tmp_path, max_entries=100)
    for i in range(1, 6):
        t.maybe_append(1000 + i, BASE + i)
    untrimmed = TimeIndex(t.path, BASE, writable=False)
    assert os.path.getsize(t.path) == 1200 and untrimmed.entries == 5
    untrimmed.sanity_check()
    t.close()
    assert os.path.getsize(t.path) == 60
    trimmed = TimeIndex(t.path, BASE, writable=False)
    assert trimmed.entries == 5 and trimmed.last_entry() == TimestampOffset(1005, BASE + 5)
    trimmed.sanity_check()


def test_time_single_zero_entry(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    t.maybe_append(0, BASE)
    t.close()
    assert TimeIndex(t.path, BASE, writable=False).last_entry() == TimestampOffset(0, BASE)
    assert TimeIndex.read_last_entry_only(t.path, BASE) == TimestampOffset(0, BASE)


def test_time_sanity_check_failures(tmp_path: Path) -> None:
    bad_len = tmp_path / "a.timeindex"
    bad_len.write_bytes(struct.pack(">qi", 5, 1) + b"\x01")
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        TimeIndex(bad_len, 0, writable=False).sanity_check()
    backwards = tmp_path / "b.timeindex"
    backwards.write_bytes(struct.pack(">qi", 500, 1) + struct.pack(">qi", 100, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(backwards, 0, writable=False).sanity_check()
    below_base = tmp_path / "c.timeindex"
    below_base.write_bytes(struct.pack(">qi", 500, -3))
    with pytest.raises(CorruptIndexError, match="less than the base offset"):
        TimeIndex(below_base, 10, writable=False).sanity_check()


def test_time_lazy_creation(tmp_path: Path) -> None:
    t = time_index(tmp_path)
    assert t.lookup(5) == TimestampOffset(-1, BASE) and not t.exists()
    t.maybe_append(-1, BASE)  # nothing appended: nothing created either
    assert not t.exists()
    t.maybe_append(7, BASE + 1)
    assert os.path.getsize(t.path) == 30 * 12


# --------------------------------------------------------------------------- read_last_entry_only


def test_read_last_entry_only_cases(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000045.timeindex"
    assert TimeIndex.read_last_entry_only(path, BASE) == TimestampOffset(-1, BASE)  # missing
    t = TimeIndex(path, BASE, 10485760)
    t.maybe_append(0, BASE)
    # an all-zero first entry in an untrimmed file cannot be told from the zero tail: every
    # reader of the file sees an empty index (Kafka never writes it: the first append of a
    # segment is not indexed, and the roll entry is written just before trimming)
    assert TimeIndex.read_last_entry_only(path, BASE) == TimestampOffset(-1, BASE)
    assert TimeIndex(path, BASE, writable=False).last_entry() == TimestampOffset(-1, BASE)
    t.reset()
    assert TimeIndex.read_last_entry_only(path, BASE) == TimestampOffset(-1, BASE)  # all zero
    for i in range(1, 400):
        t.maybe_append(i * 3, BASE + i)
    assert TimeIndex.read_last_entry_only(path, BASE) == TimestampOffset(399 * 3, BASE + 399)
    t.close()
    assert TimeIndex.read_last_entry_only(path, BASE) == TimestampOffset(399 * 3, BASE + 399)
    empty = tmp_path / "empty.timeindex"
    empty.write_bytes(b"")
    assert TimeIndex.read_last_entry_only(empty, 7) == TimestampOffset(-1, 7)


def test_read_last_entry_only_of_a_file_trimmed_under_it(tmp_path: Path, monkeypatch) -> None:
    """A reader's ``fstat`` saw the writer's preallocated file, which the writer's close then
    trimmed before the reader's ``pread``: the empty read was decoded as an entry, and the dry
    runs failed with "not enough values to unpack"."""
    path = tmp_path / "00000000000000000045.timeindex"
    t = TimeIndex(path, BASE, 10485760)
    for i in range(1, 4):
        t.maybe_append(i * 3, BASE + i)
    real_pread = os.pread
    trims = []

    def pread_after_the_writers_close(fd, n, offset):
        if not trims:
            trims.append(offset)
            t.close()  # trimmed to its three entries, between the reader's fstat and its read
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", pread_after_the_writers_close)
    assert TimeIndex.read_last_entry_only(path, BASE) == TimestampOffset(9, BASE + 3)
    assert trims and trims[0] > os.path.getsize(path)  # the first read aimed past the trimmed end


@given(
    st.lists(st.integers(min_value=1, max_value=10**6), unique=True, max_size=40),
    st.integers(min_value=0, max_value=3000),
    st.sampled_from(["sparse", "written", "trimmed"]),
)
@settings(max_examples=80, deadline=None)
def test_read_last_entry_only_equals_last_entry(
    tmp_path_factory: pytest.TempPathFactory, rels: list[int], tail_entries: int, layout: str
) -> None:
    path = tmp_path_factory.mktemp("t") / "0.timeindex"
    rels = sorted(rels)
    entries = b"".join(struct.pack(">qi", 1000 + i, r) for i, r in enumerate(rels))
    if layout == "sparse":
        t = TimeIndex(path, BASE, (len(rels) + tail_entries + 1) * 12)
        for i, r in enumerate(rels):
            t.maybe_append(1000 + i, BASE + r)
        if not rels:
            t.trim_to_valid_size()
            t.resize((tail_entries + 2) * 12)
    elif layout == "written":
        path.write_bytes(entries + bytes(12 * tail_entries))
    else:
        path.write_bytes(entries)
    loaded = TimeIndex(path, BASE, writable=False)
    if rels or os.path.getsize(path) != 12:
        assert loaded.entries == len(rels)
    # else: a 12-byte all-zero file is a trimmed index holding (0, base); both readers agree
    assert TimeIndex.read_last_entry_only(path, BASE) == loaded.last_entry()


# --------------------------------------------------------------------------- real Kafka files


def _real_indexes(suffix: str) -> list[Path]:
    if not REAL_KAFKA.is_dir():
        return []
    return sorted(p for p in REAL_KAFKA.rglob(f"*{suffix}*") if p.name.split(".")[0].isdigit())


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
def test_real_kafka_offset_indexes() -> None:
    files = [p for p in _real_indexes(".index")]
    assert files
    for path in files:
        base = int(path.name.split(".")[0])
        idx = OffsetIndex(path, base, writable=False)
        idx.sanity_check()
        assert idx.entries == os.path.getsize(path) // 8, path  # Kafka trims: every slot is an entry
        if idx.entries:
            assert idx.lookup(idx.last_offset) == idx.entry(idx.entries - 1)
            assert idx.entry(0).position > 0  # Kafka never indexes the first append


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
def test_real_kafka_time_indexes() -> None:
    files = _real_indexes(".timeindex")
    assert files
    for path in files:
        base = int(path.name.split(".")[0])
        idx = TimeIndex(path, base, writable=False)
        idx.sanity_check()
        assert idx.entries == os.path.getsize(path) // 12, path
        assert TimeIndex.read_last_entry_only(path, base) == idx.last_entry(), path


def test_offset_index_read_last_entry_only(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_entries=5000)
    assert OffsetIndex.read_last_entry_only(idx.path, BASE) == OffsetPosition(BASE, 0)  # missing
    for i in range(1, 700):
        idx.append(BASE + i * 2, i * 33)
    expected = OffsetPosition(BASE + 699 * 2, 699 * 33)
    assert OffsetIndex.read_last_entry_only(idx.path, BASE) == expected  # untrimmed
    idx.truncate_to(BASE + 11)
    assert OffsetIndex.read_last_entry_only(idx.path, BASE) == idx.last_entry() == OffsetPosition(BASE + 10, 165)
    idx.close()
    assert OffsetIndex.read_last_entry_only(idx.path, BASE) == OffsetPosition(BASE + 10, 165)  # trimmed


@pytest.mark.skipif(not REAL_KAFKA.is_dir(), reason=f"real Kafka fixtures not present at {REAL_KAFKA}")
def test_real_kafka_offset_index_last_entry_only() -> None:
    for path in _real_indexes(".index"):
        base = int(path.name.split(".")[0])
        assert OffsetIndex.read_last_entry_only(path, base) == OffsetIndex(path, base, writable=False).last_entry()
