"""The record core's switch (``storage_engine.native``): ``use``/``status``/``compiled``, the
errors for a choice that cannot be honoured, the stale-build check, and ``LOGPLAT_CORE`` read by
a fresh process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from storage_engine import native
from storage_engine.errors import LogError
from tests.helpers.paths import REPO

BUILT = native._MODULE is not None
NOT_BUILT = "the compiled core is not built in this checkout"


@pytest.fixture
def restore_choice():
    prev = native.status().requested
    yield
    native.use(prev)


def test_reference_is_chosen_by_name_and_compiled_then_returns_none(restore_choice):
    chosen = native.use("reference")
    assert chosen == native.status() and (chosen.name, chosen.requested) == ("reference", "reference")
    assert native.compiled() is None
    assert chosen.describe() == "reference (pure Python: chosen)"


@pytest.mark.skipif(not BUILT, reason=NOT_BUILT)
@pytest.mark.parametrize("kind", ["compiled", "auto", " Compiled "])
def test_compiled_and_auto_run_the_built_core(restore_choice, kind):
    chosen = native.use(kind)
    assert chosen.name == "compiled" and chosen.requested == kind.strip().lower()
    assert native.compiled() is native._MODULE
    assert chosen.describe() == "compiled (Rust, storage_engine.native._core)"


def test_an_unknown_value_is_an_error_that_changes_nothing(restore_choice):
    before = native.status()
    with pytest.raises(native.CoreUnavailableError, match="must be one of auto, compiled, reference, not 'rust'"):
        native.use("rust")
    assert native.status() == before and issubclass(native.CoreUnavailableError, LogError)


def test_compiled_is_refused_when_the_core_is_not_built(restore_choice, monkeypatch):
    monkeypatch.setattr(native, "_MODULE", None)
    monkeypatch.setattr(native, "_WHY", "compiled core is not built (no module)")
    with pytest.raises(native.CoreUnavailableError, match="LOGPLAT_CORE=compiled, but the compiled core is not built"):
        native.use("compiled")
    auto = native.use("auto")
    assert (auto.name, auto.reason) == ("reference", "compiled core is not built (no module)")
    assert native.compiled() is None


def test_the_source_hash_sees_a_changed_source_or_build_file(tmp_path: Path):
    crate = REPO / "native"
    copy = tmp_path / "native"
    shutil.copytree(crate, copy, ignore=shutil.ignore_patterns("target", "fuzz"))
    assert native._source_hash(copy) == native._source_hash(crate) is not None
    first = sorted((copy / "src").glob("*.rs"))[0]
    first.write_bytes(first.read_bytes() + b"\n")
    assert native._source_hash(copy) != native._source_hash(crate)
    (copy / "src" / "new.rs").write_text("")  # a new file counts too, by name
    first.write_bytes((crate / "src" / first.name).read_bytes())
    assert native._source_hash(copy) != native._source_hash(crate)
    (copy / "src" / "new.rs").unlink()
    assert native._source_hash(copy) == native._source_hash(crate)
    (copy / "Cargo.toml").write_text((crate / "Cargo.toml").read_text() + "\n")  # a build setting
    assert native._source_hash(copy) != native._source_hash(crate)
    assert native._source_hash(tmp_path / "missing") is None


@pytest.mark.skipif(not BUILT, reason=NOT_BUILT)
def test_the_built_core_matches_these_sources():
    assert native._MODULE.SOURCE_HASH == native._source_hash(REPO / "native")
    assert native._MODULE.ABI == native.ABI


@pytest.mark.parametrize("value, expected", [("reference", "reference reference"),
                                             ("bogus", "unusable bogus unusable")])
def test_a_fresh_process_reads_the_env_var(value, expected):
    code = ("from storage_engine import native\n"
            "s = native.status()\n"
            "try:\n    native.compiled(); tail = ''\n"
            "except native.CoreUnavailableError:\n    tail = ' unusable'\n"
            "print(s.name, s.requested + tail)")
    env = {**os.environ, native.ENV_VAR: value}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


@pytest.mark.skipif(not BUILT, reason=NOT_BUILT)
def test_the_engine_zip_spark_ships_carries_the_core_and_workers_load_it_from_beside_the_zip(tmp_path: Path):
    """Workers without our environment import the engine from the zip ``engine_zip`` builds: the
    core inside it is written beside the zip (Spark's per-session folder) and loaded from there,
    so ``LOGPLAT_CORE=compiled`` holds on them too; a folder others can write is refused."""
    from spark_jobs.runtime.session import engine_zip

    folder = tmp_path / "session-files"
    folder.mkdir(mode=0o700)
    archive = engine_zip(folder)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from storage_engine import native; "
             "print(native.__file__.startswith(sys.argv[1]), native.status().name, native._MODULE.__file__)")
    env = {**os.environ, "LOGPLAT_CORE": "compiled"}
    out = subprocess.run([sys.executable, "-c", probe, str(archive)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, check=True).stdout.split()
    assert out[:2] == ["True", "compiled"] and Path(out[2]).parent == folder
    folder.chmod(0o777)
    hot_path = "import sys; sys.path.insert(0, sys.argv[1]); from storage_engine import native; native.compiled()"
    refused = subprocess.run([sys.executable, "-c", hot_path, str(archive)], capture_output=True, text=True,
                             env=env, cwd=tmp_path)
    assert refused.returncode == 1
    assert "the compiled core shipped in the engine zip was not loaded" in refused.stderr
    assert "is not this user's alone" in refused.stderr


@pytest.mark.skipif(not BUILT, reason=NOT_BUILT)
def test_a_core_in_the_engine_zip_that_cannot_load_leaves_the_reference_running_and_says_why(tmp_path: Path):
    """A worker of another architecture (here: some other extension in the core's place) cannot
    load the shipped core: the engine still imports and runs the reference, naming why."""
    import zipfile

    folder = tmp_path / "session-files"
    folder.mkdir(mode=0o700)
    archive = folder / "logplat_engine.zip"
    foreign = Path(zipfile.__file__).parent / "lib-dynload"
    other = next(foreign.glob("_json*.so"))
    with zipfile.ZipFile(archive, "w") as zf:
        for name in ("storage_engine", "spark_jobs"):
            for path in sorted((REPO / name).rglob("*.py")):
                zf.write(path, path.relative_to(REPO).as_posix())
        zf.write(other, "storage_engine/native/_core.so")
    probe = "import sys; sys.path.insert(0, sys.argv[1]); from storage_engine import native; print(native.status())"
    out = subprocess.run([sys.executable, "-c", probe, str(archive)], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "LOGPLAT_CORE": "auto"}, check=True).stdout
    assert "name='reference'" in out and "shipped in the engine zip was not loaded (ImportError" in out
