"""choose_log_dir: a new partition goes to the log dir holding the fewest partitions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage_engine.errors import LogError
from storage_engine.logdir.placement import choose_log_dir


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
