"""The record package stays light: the engine and logctl never load pyarrow or numpy (only the
columnar decoder, which Spark uses, does)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.paths import REPO


def test_the_engine_and_logctl_load_neither_pyarrow_nor_numpy():
    code = ("import sys, storage_engine.record, storage_engine.logdir.manager, storage_engine.tools.logctl; "
            "print(sorted(m for m in ('pyarrow', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = "import sys, storage_engine.record.columnar; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
