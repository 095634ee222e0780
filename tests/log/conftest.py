"""Fixtures of the log-layer tests."""

from __future__ import annotations

import pytest

from tests.helpers.cli import run_logctl


@pytest.fixture
def logctl(tmp_path, monkeypatch, capsys):
    """``logctl`` in-process over ``tmp_path / "logs"`` (its ``root`` attribute)."""
    root = tmp_path / "logs"

    def call(*args: str, stdin: str = "") -> tuple[int, str, str]:
        return run_logctl(root, monkeypatch, capsys, *args, stdin=stdin)

    call.root = root  # type: ignore[attr-defined]
    return call
