"""``logctl`` run in-process (fast: no interpreter start), as a test sees it: exit status, stdout, stderr."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from storage_engine.tools.logctl import main


def run_logctl(root: Path, monkeypatch, capsys, *args: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["--log-dirs", str(root), *args])
    out, err = capsys.readouterr()
    return code, out, err
