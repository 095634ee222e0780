"""The key map file a distributed map build hands between tasks and the driver: what is written
is read back, and a damaged or foreign file is refused rather than half read."""

from __future__ import annotations

import os

import pytest

from storage_engine.cleaner.map_file import read_map, write_map
from storage_engine.errors import CorruptRecordError


def test_a_map_reads_back_as_written(tmp_path):
    table = {os.urandom(n % 40): n for n in range(2000)} | {b"": 7}
    write_map(tmp_path / "m.map", table)
    assert read_map(tmp_path / "m.map") == table
    write_map(tmp_path / "empty.map", {})
    assert read_map(tmp_path / "empty.map") == {}


def test_an_existing_file_is_never_overwritten(tmp_path):
    write_map(tmp_path / "m.map", {b"k": 1})
    with pytest.raises(FileExistsError):
        write_map(tmp_path / "m.map", {b"k": 2})


@pytest.mark.parametrize("damage", ["magic", "short", "long"])
def test_a_damaged_file_is_refused(tmp_path, damage):
    path = tmp_path / "m.map"
    write_map(path, {b"key-%d" % i: i for i in range(10)})
    data = path.read_bytes()
    path.write_bytes({"magic": b"XXXXX" + data[5:], "short": data[:-3], "long": data + b"x"}[damage])
    with pytest.raises(CorruptRecordError):
        read_map(path)
