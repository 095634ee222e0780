"""The split path's key maps under the compiled core (issue 36): a span's key scan writes the same
map file bytes under both cores, the compiled ``KeyMap`` loads exactly the files the reference
``decode_map`` reads (same table; damaged files refused with the reference's error) and loading
span maps one after another merges them as the reference's dict merge does."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from storage_engine import native
from storage_engine.cleaner.dirty_scan import UNBOUNDED
from storage_engine.cleaner.inputs import InputSegment
from storage_engine.cleaner.map_file import decode_map, encode_map, load_map, write_map_bytes
from storage_engine.cleaner.split import KeysTask, scan_span_keys, span_map
from storage_engine.cleaner.staging import REMOTE_STAGING_PREFIX
from storage_engine.errors import LogError
from tests.helpers.cleaner import raw_log
from tests.helpers.core_switch import CORES, using
from tests.native.test_compaction_differential import random_segments

pytestmark = pytest.mark.skipif(native._MODULE is None, reason="the compiled core is not built here")


def random_table(rnd: random.Random, n: int) -> dict[bytes, int]:
    """Keys of 0-300 bytes (length varints of one and two bytes), offsets anywhere a map holds."""
    base = rnd.randrange(1 << 40)
    return {rnd.randbytes(rnd.choice([0, 1, 16, 16, 127, 128, 300])): base + rnd.randrange(1 << 30)
            for _ in range(n)}


def loaded(data: bytes, path: Path, core: str) -> tuple[str, object]:
    """``("ok", each key's offset)`` or ``(error class, message)`` of the span map merged from
    a file of ``data`` under ``core``."""
    path.unlink(missing_ok=True)
    write_map_bytes(path, data)
    with using(core):
        try:
            omap = span_map([str(path)])
        except LogError as exc:
            return type(exc).__name__, str(exc)
        return "ok", {key: omap.get(key) for key in decode_map(data, path)}


@pytest.mark.parametrize("seed", range(4))
def test_a_keymap_writes_the_bytes_the_reference_encodes_and_reads_them_back(seed):
    rnd = random.Random(seed)
    table = random_table(rnd, rnd.choice([0, 1, 50, 3000]))
    keymap = native._MODULE.KeyMap(UNBOUNDED)
    for key, offset in table.items():
        keymap.put(key, offset)
    data = keymap.to_map_file()
    assert data == encode_map(table)
    again = native._MODULE.KeyMap(UNBOUNDED)
    assert again.put_map_file(data)
    assert list(again.to_dict().items()) == list(table.items())


def test_loading_span_maps_one_after_another_merges_them_as_the_reference_does(tmp_path):
    rnd = random.Random(7)
    keys = [rnd.randbytes(rnd.randint(0, 40)) for _ in range(500)]
    paths, offset = [], 1000
    for span in range(3):  # later spans hold later offsets, and many keys of earlier ones
        table = {}
        for key in rnd.sample(keys, 300):
            offset += rnd.randint(1, 5)
            table[key] = offset
        paths.append(str(tmp_path / f"span-{span}.map"))
        write_map_bytes(Path(paths[-1]), encode_map(table))
    merged = {}
    for core in CORES:
        with using(core):
            omap = span_map(paths)
            merged[core] = (len(omap), {key: omap.get(key) for key in keys})
    assert merged["compiled"] == merged["reference"]


@pytest.mark.parametrize("seed", range(3))
def test_damaged_map_files_are_refused_exactly_as_the_reference_refuses_them(tmp_path, seed):
    """Cut, lengthened, bytes flipped, the count or a key length rewritten: the compiled merge
    accepts exactly what ``decode_map`` accepts, with the same table (offsets too far apart for
    the compiled map go to the reference's dict), else the same error."""
    rnd = random.Random(seed)
    table = random_table(rnd, rnd.randint(1, 40))
    data = encode_map(table)
    path = tmp_path / "m.map"
    damaged = [b"", data[:4], data[:13], data + b"\x00", b"LPKM2" + data[5:]]
    for _ in range(150):
        d = bytearray(data)
        kind = rnd.randrange(4)
        if kind == 0:
            d = d[:rnd.randrange(len(d))]
        elif kind == 1:
            d[rnd.randrange(len(d))] ^= 1 << rnd.randrange(8)
        elif kind == 2:  # the count
            d[5:13] = rnd.choice([0, 1, len(table) - 1, len(table) + 1, (1 << 64) - 1, 1 << 62]).to_bytes(8, "big")
        else:  # one key's length: the keys no longer add up, or add up with other boundaries
            at = 13 + 4 * rnd.randrange(len(table))
            d[at:at + 4] = rnd.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF]).to_bytes(4, "little")
        damaged.append(bytes(d))
    for data in damaged:
        assert loaded(data, path, "compiled") == loaded(data, path, "reference"), data[:40]
        keymap = native._MODULE.KeyMap(UNBOUNDED)
        try:
            load_map(keymap, path)
        except (LogError, OverflowError):  # refused (or offsets it cannot hold) before anything went in
            assert len(keymap) == 0


@pytest.mark.parametrize("seed", range(3))
def test_a_span_key_scan_writes_the_same_map_file_under_both_cores(tmp_path, seed):
    segments = random_segments(seed, distinct=seed == 2)
    m = raw_log(tmp_path / "log", segments)
    try:
        log = m.get_log("t", 0)
        inputs = [InputSegment(seg, False, 1 << 16) for seg in log.segments[:-1]]
        refs = tuple((inp.ref, ()) for inp in inputs)
        for inp in inputs:
            inp.close()
        files = {}
        for core in CORES:
            with using(core):
                staging = tmp_path / f"{REMOTE_STAGING_PREFIX}{core}"
                task = KeysTask(0, 0, refs, 3, 10**9, 1 << 16, str(staging))
                _, _, path, _ = scan_span_keys(task, "a")
                files[core] = Path(path).read_bytes()
        assert files["compiled"] == files["reference"] and len(decode_map(files["reference"], Path(path)))
    finally:
        m.close()
