"""``logctl``'s commands as declared (``storage_engine.tools.logctl``): options anywhere, a help
string for each, and the engines other packages plug in through the ``logplat.engines`` entry
point, loaded only when a run asks for one."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from storage_engine.tools.logctl import console, main
from storage_engine.tools.logctl import engines as engines_module
from storage_engine.tools.logctl.main import build_parser
from tests.helpers.paths import REPO

MADE: list[str] = []


class FakeEngine:
    """An engine a plug-in would register: it records what it was asked and answers nothing."""

    def __init__(self) -> None:
        MADE.append("made")

    def compact(self, manager, partitions, *, force, now_ms):
        MADE.append(f"compact {partitions} force={force}")
        return []

    def retention(self, manager, topic, *, now_ms, dry_run):
        MADE.append(f"retention {topic}")
        return []

    def stop(self) -> None:
        MADE.append("stopped")


def _plug(monkeypatch, *points: EntryPoint) -> None:
    monkeypatch.setattr(engines_module, "entry_points", lambda group: [p for p in points if p.group == group])


def _console(*argv: str) -> int:
    with pytest.raises(SystemExit) as exited:
        saved = sys.argv
        sys.argv = ["logctl", *argv]
        try:
            console()
        finally:
            sys.argv = saved
    return exited.value.code


@pytest.mark.parametrize("place", ["before", "after", "between"])
def test_global_options_are_taken_after_the_subcommand_too(tmp_path, capsys, place):
    dirs = ["--log-dirs", str(tmp_path)]
    create = {"before": [*dirs, "topic", "create", "t", "--partitions", "1"],
              "after": ["topic", "create", "t", "--partitions", "1", *dirs],
              "between": ["topic", *dirs, "create", "t", "--partitions", "1"]}[place]
    assert main(create) == 0 and (tmp_path / "t-0").is_dir()
    capsys.readouterr()
    assert main(["topic", "list", "--json", *dirs]) == 0
    assert json.loads(capsys.readouterr().out) == ["t"]


def test_the_log_dirs_given_after_the_subcommand_win(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    assert main(["--log-dirs", str(tmp_path / "missing"), "topic", "create", "t", "--partitions", "1",
                 "--log-dirs", str(tmp_path / "a")]) == 0
    assert (tmp_path / "a" / "t-0").is_dir() and not (tmp_path / "missing").exists()


def test_every_option_and_argument_has_a_help_string():
    def leaves(parser: argparse.ArgumentParser, name: str):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield name, parser
        for action in subs:
            for sub_name, sub in action.choices.items():
                yield from leaves(sub, f"{name} {sub_name}")

    missing = [f"{name}: {action.dest}" for name, parser in leaves(build_parser(), "logctl")
               for action in parser._actions if not action.help]
    assert missing == []


def test_an_engine_plugged_in_is_made_only_when_asked_for_and_stopped(tmp_path, monkeypatch, capsys):
    MADE.clear()
    _plug(monkeypatch, EntryPoint("spark", f"{__name__}:FakeEngine", "logplat.engines"))
    assert main(["--log-dirs", str(tmp_path), "topic", "create", "c", "--partitions", "1", "--config",
                 "cleanup.policy=compact"]) == 0
    assert _console("--log-dirs", str(tmp_path), "topic", "list") == 0 and MADE == []
    assert _console("--log-dirs", str(tmp_path), "compact", "--engine", "spark", "--topic", "c", "--partition", "0",
                    "--now-ms", "1000") == 0
    assert MADE == ["made", "compact [('c', 0)] force=True", "stopped"]
    assert _console("--log-dirs", str(tmp_path), "retention", "--engine", "spark", "--json") == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["engine"] == "spark"


def test_an_engine_no_package_plugs_in_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    _plug(monkeypatch)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert _console("--log-dirs", str(tmp_path), "retention", "--engine", "spark") == 1
    err = capsys.readouterr().err
    assert err == ("error: --engine spark is not available in this entry point "
                   "(no installed package registers it as a logplat.engines entry point)\n")


def test_the_engine_s_logctl_imports_neither_spark_nor_the_spark_jobs(tmp_path):
    code = ("import sys; from storage_engine.tools.logctl import main; "
            f"assert main(['--log-dirs', {str(tmp_path)!r}, 'topic', 'list']) == 0; "
            "print(sorted(m for m in ('pyspark', 'spark_jobs', 'dagster') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_python_dash_m_runs_the_engine_alone(tmp_path: Path):
    proc = subprocess.run([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(tmp_path),
                           "compact", "--engine", "spark"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr == ("error: --engine spark is not available in this entry point "
                           "(run the `logctl` command)\n")
