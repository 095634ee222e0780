"""``logctl core``: which record core runs and why, and a ``LOGPLAT_CORE`` that cannot be
honoured refusing every command with one line (``storage_engine.native``, ``tools/logctl/core.py``).

The refusals run in fresh processes, since the switch reads ``LOGPLAT_CORE`` at import; "the
compiled core is not built" is made by blocking the import of ``storage_engine.native._core``
(``sys.modules[name] = None``), what an install without Rust leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from storage_engine import native
from storage_engine.tools.logctl import main
from tests.helpers.paths import REPO

_UNBUILT = "import sys; sys.modules['storage_engine.native._core'] = None; "


def _logctl(env_value: str | None, *argv: str, unbuilt: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != native.ENV_VAR}
    if env_value is not None:
        env[native.ENV_VAR] = env_value
    code = ((_UNBUILT if unbuilt else "import sys; ") +
            f"from storage_engine.tools.logctl import main; sys.exit(main({list(argv)!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)


def test_core_prints_the_implementation_in_use_and_what_was_requested(capsys):
    prev = native.status().requested
    try:
        native.use("reference")
        assert main(["core"]) == 0
        out = capsys.readouterr().out
        assert out.splitlines()[0] == "record core: reference (pure Python: chosen)"
        assert main(["core", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["core"] == "reference" and report["requested"] == "reference" and report["error"] is None
        assert report["env"] == {native.ENV_VAR: os.environ.get(native.ENV_VAR)}
    finally:
        native.use(prev)


@pytest.mark.skipif(native._MODULE is None, reason="the compiled core is not built in this checkout")
def test_core_names_the_compiled_core_when_it_runs(capsys):
    prev = native.status().requested
    try:
        native.use("compiled")
        assert main(["core", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["core"], report["describe"]) == ("compiled", "compiled (Rust, storage_engine.native._core)")
    finally:
        native.use(prev)


def test_the_env_var_chooses_in_a_fresh_process():
    proc = _logctl("reference", "core", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["env"] == {native.ENV_VAR: "reference"}
    assert json.loads(proc.stdout)["core"] == "reference"


def test_without_a_built_core_auto_runs_the_reference_and_says_why():
    proc = _logctl(None, "core", "--json", unbuilt=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["core"] == "reference" and report["requested"] == "auto"
    assert report["reason"].startswith("compiled core is not built")


@pytest.mark.parametrize("env_value, unbuilt, error", [
    ("bogus", False, "error: LOGPLAT_CORE must be one of auto, compiled, reference, not 'bogus'\n"),
    ("compiled", True, "error: LOGPLAT_CORE=compiled, but the compiled core is not built"),
])
def test_a_core_that_cannot_be_honoured_fails_every_command_with_one_line(tmp_path, env_value, unbuilt, error):
    for argv in (["--log-dirs", str(tmp_path), "topic", "list"], ["dump", str(tmp_path / "missing.log")],
                 ["core"]):
        proc = _logctl(env_value, *argv, unbuilt=unbuilt)
        assert proc.returncode == 1, (argv, proc.stdout, proc.stderr)
        assert proc.stderr.startswith(error) and proc.stderr.count("\n") == 1, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert _logctl(env_value, "core", unbuilt=unbuilt).stdout.splitlines()[0] == "record core: unusable"
