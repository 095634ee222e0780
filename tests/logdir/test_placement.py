"""Placement: a new partition goes to the log dir holding the fewest partitions, never to a
cordoned one."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage_engine.errors import LogDirsCordonedError, LogError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.manager import LogManager
from storage_engine.logdir.placement import ALL_CORDONED, choose_log_dir
from storage_engine.logdir.topic_store import TOPICS_DIR
from tests.helpers.cli import run_logctl


def test_choose_log_dir() -> None:
    assert choose_log_dir({"/a": 3, "/b": 1, "/c": 2}) == "/b"
    assert choose_log_dir({"/a": 1, "/b": 1, "/c": 2}) == "/a"  # tie: first given
    assert choose_log_dir({"/c": 0, "/a": 0}) == "/c"
    with pytest.raises(LogError):
        choose_log_dir({})


@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=8))
def test_property_choose_log_dir(counts: list[int]) -> None:
    dirs = {f"/d{i}": c for i, c in enumerate(counts)}
    chosen = choose_log_dir(dirs)
    assert dirs[chosen] == min(counts)
    assert chosen == f"/d{counts.index(min(counts))}"


# --------------------------------------------------------------------------- cordoned.log.dirs (KIP-1066)
# A 4.4 broker's behaviour, read from one: tests/live_kafka/test_kafka4_semantics.py.


def _dirs(tmp_path: Path, n: int = 2) -> list[Path]:
    dirs = [tmp_path / f"logs-{i}" for i in range(n)]
    for d in dirs:
        d.mkdir()
    return dirs


def test_new_partitions_never_go_to_a_cordoned_log_dir(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    with LogManager(dirs, {"cordoned.log.dirs": str(dirs[0])}) as m:
        m.admin.create_topic("a", 3)
        m.admin.create_topic("b", 2)
        assert {loc.log_dir.path for loc in m.partition_locations().values()} == {dirs[1].resolve()}


def test_partitions_already_in_a_cordoned_log_dir_keep_working(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path)
    with LogManager(dirs) as m:
        m.admin.create_topic("t", 2)  # one partition in each
    with LogManager(dirs, {"cordoned.log.dirs": str(dirs[0])}) as m:
        for p in range(2):
            m.get_log("t", p).append([ProducerRecord(b"k", b"v", 1)], now=1)
        m.admin.add_partitions("t", 4)
        placed = {tp: loc.log_dir.path for tp, loc in m.partition_locations().items()}
    assert [placed[("t", p)] for p in range(4)] == [dirs[0].resolve()] + [dirs[1].resolve()] * 3


@pytest.mark.parametrize("cordoned", ["*", "{0},{1}"])
def test_every_log_dir_cordoned_refuses_a_new_partition_and_writes_nothing(tmp_path: Path, cordoned: str) -> None:
    dirs = _dirs(tmp_path)
    props = {"cordoned.log.dirs": cordoned.format(*dirs)}
    with LogManager(dirs, props) as m:
        before = sorted(p for d in dirs for p in d.rglob("*"))
        with pytest.raises(LogDirsCordonedError) as info:
            m.admin.create_topic("t", 1)
        assert str(info.value).startswith(ALL_CORDONED)
        assert sorted(p for d in dirs for p in d.rglob("*")) == before


def test_logctl_refuses_in_one_line_and_a_cordoned_entry_must_be_a_log_dir(tmp_path, monkeypatch, capsys) -> None:
    dirs = _dirs(tmp_path)
    props = tmp_path / "server.properties"
    monkeypatch.setenv("LOGPLAT_SERVER_PROPERTIES", str(props))
    log_dirs = ",".join(map(str, dirs))

    def create(cordoned: str) -> tuple[int, str, str]:
        props.write_text(f"cordoned.log.dirs={cordoned}\n")
        return run_logctl(tmp_path, monkeypatch, capsys, "--log-dirs", log_dirs, "topic", "create", "t",
                          "--partitions", "1")

    code, out, err = create("*")
    assert (code, out) == (1, "") and err.startswith(f"error: {ALL_CORDONED}") and err.count("\n") == 1
    code, out, err = create(f"{dirs[0]},{tmp_path / 'nowhere'}")
    assert (code, out) == (1, "")
    assert err == ("error: All entries in cordoned.log.dirs must be present in log.dirs or log.dir. Missing entries : "
                   f"{tmp_path / 'nowhere'}\n")
    written = [p for d in dirs for p in d.rglob("*") if p.name.startswith("t") or p.parent.name == TOPICS_DIR]
    assert written == []  # no metadata, no partition directory
    assert create(str(dirs[0]))[0] == 0
    assert (dirs[1] / "t-0").is_dir()
