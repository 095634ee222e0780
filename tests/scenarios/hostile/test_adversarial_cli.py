"""An adversarial pass over ``logctl``: hundreds of bad inputs (names, numbers, configs, JSON
lines, encodings, clocks, file names, environment), each of which must give exit status 1, a
one-line error on stderr (never a traceback) and a log dir whose every file, name and symlink is
byte-identical afterwards.

Most cases run in-process through ``storage_engine.tools.logctl.main`` (fast); a handful run the real
``logctl`` executable, including input only a real process can get (undecodable stdin bytes).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from storage_engine.tools.logctl import main
from tests.helpers.paths import REPO

GOOD = json.dumps({"key": "k", "value": "v"}) + "\n"


def _build_template(root: Path) -> None:
    """Topics ``plain`` (delete, 2 partitions) and ``comp`` (compacted) with data, every internal
    file already created, so a refused command has nothing legitimate to create either."""
    for args, stdin in (
        (["topic", "create", "plain", "--partitions", "2"], ""),
        (["topic", "create", "comp", "--partitions", "1", "--config", "cleanup.policy=compact"], ""),
        (["produce", "plain", "--partition", "0", "--now-ms", "1000"], GOOD * 3),
        (["produce", "comp", "--partition", "0", "--now-ms", "1000"], GOOD * 3),
        (["topic", "alter", "plain", "--config", "retention.ms=86400000"], ""),
        (["delete-records", "plain", "--partition", "0", "--before-offset", "0"], ""),
    ):
        saved = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            assert main(["--log-dirs", str(root), *args]) == 0, args
        finally:
            sys.stdin = saved


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("adversarial")
    _build_template(base / "logs")
    index = base / "logs" / "plain-0" / "00000000000000000000.index"
    (base / "files").mkdir()
    shutil.copyfile(index, base / "files" / "good.index")
    shutil.copyfile(index, base / "files" / "x.timeindex")
    (base / "files" / "noext").write_bytes(b"\x00" * 8)
    os.mkfifo(base / "files" / "fifo.log")  # dump would wait for a writer for ever
    (base / "files" / "garbage-checkpoint").write_bytes(b"zero\n1\nt 0 0\n")
    (base / "files" / "bad.properties").write_text("log.retention.ms=abc\n")
    (base / "files" / "zero-partitions.properties").write_text("logplat.max.partitions.per.topic=0\n")
    (base / "files" / "latin1.properties").write_bytes(b"log.retention.ms=\xe9\xff\n")
    (base / "files" / "bad-escape.properties").write_text("log.retention.ms=\\u12zz\n")
    (base / "files" / "continued.properties").write_text("log.retention.ms=1\\\n    x\n")  # read as "1x"
    return base


def snapshot(root: Path) -> dict[str, object]:
    """Every entry under ``root`` without following links: bytes of files, targets of links."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


# (argv after --log-dirs, stdin); "{files}" is replaced by the fixture files' directory.
CASES: list[tuple[list[str], str]] = []


def case(*argv: str, stdin: str = "") -> None:
    CASES.append((list(argv), stdin))


# --- topic names ------------------------------------------------------------------------------
for name in ["", ".", "..", "a b", "a/b", "../x", "/abs", "x" * 250, "x" * 1000, "tópico", "a\nb", "a\tb",
             "emoji😀", "a:b", "a*b", "a,b", "a=b", "a@b", "a#b", "a%b", "$x", "a\\b", "a\x00b", "plain", "comp"]:
    case("topic", "create", name, "--partitions", "1")
for name in ["", "..", "a/b", "../../etc", "x" * 250, "nosuch", "a b"]:
    case("topic", "describe", name)
    case("topic", "delete", name)
    case("topic", "alter", name, "--config", "retention.ms=1")
    case("produce", name, "--partition", "0", stdin=GOOD)
    case("consume", name, "--partition", "0")
for name in ["nosuch", "../plain", "bad name"]:
    case("verify", "--topic", name)
    case("retention", "--topic", name)
    case("compact", "--topic", name)
    case("delete-records", name, "--partition", "0", "--before-offset", "0")

# --- numbers ----------------------------------------------------------------------------------
for count in ["0", "-1", "2147483648", "1001", "x", "1.5", "", "1e3", "0x10", "99999999999999999999"]:
    case("topic", "create", "newtopic", "--partitions", count)
for partition in ["-1", "2", "2147483648", "x", "", "1.0"]:
    case("produce", "plain", "--partition", partition, stdin=GOOD)
    case("consume", "plain", "--partition", partition)
    case("delete-records", "plain", "--partition", partition, "--before-offset", "0")
for offset in ["-1", "99999", "9223372036854775808", "x"]:
    case("consume", "plain", "--partition", "0", "--from-offset", offset)
    case("delete-records", "plain", "--partition", "0", "--before-offset", offset)
for n in ["0", "-1", "x", "2147483648"]:
    case("consume", "plain", "--partition", "0", "--max-records", n)
    case("produce", "plain", "--partition", "0", "--batch-size", n, stdin=GOOD)
    case("compact", "--topic", "comp", "--partition", "0", "--max-passes", n)
case("compact", "--partition", "0")
case("compact", "--topic", "plain", "--partition", "0", "--now-ms", "5000")
case("compact", "--topic", "comp", "--partition", "7")
case("consume", "plain", "--partition", "0", "--from-offset", "0", "--from-timestamp", "0")
case("erasure-report", "--topic", "plain")
case("erasure-report", "--partition", "0")
case("erasure-report", "--topic", "comp", "--partition", "7")
case("erasure-report", "--topic", "comp", "--partition", "-1")

# --- clocks -----------------------------------------------------------------------------------
for clock in ["-1", "99999999999999999999", "9223372036854775807", "253402300800000", "1e3", "abc", "", "1.5"]:
    case("produce", "plain", "--partition", "0", "--now-ms", clock, stdin=GOOD)
    case("retention", "--now-ms", clock)
    case("compact", "--now-ms", clock)
    case("consume", "plain", "--partition", "0", "--from-timestamp", clock)

# --- configs ----------------------------------------------------------------------------------
for pair in ["retention.ms=abc", "retention.ms=-2", "retention.ms=", "nosuch.key=1", "noequals", "=5",
             "cleanup.policy=bogus", "cleanup.policy=compact,bogus", "segment.bytes=0", "segment.bytes=13",
             "segment.bytes=99999999999", "min.cleanable.dirty.ratio=1.5", "min.cleanable.dirty.ratio=-0.1",
             "compression.type=rar", "message.timestamp.type=Bogus", "max.message.bytes=-1", "segment.ms=0",
             "delete.retention.ms=-1", "min.compaction.lag.ms=-1", "max.compaction.lag.ms=0", "preallocate=maybe",
             "retention.bytes=1.5", "segment.index.bytes=3", "file.delete.delay.ms=-1",
             "retention.ms=9223372036854775808", "min.cleanable.dirty.ratio=nan"]:
    case("topic", "create", "newtopic", "--partitions", "1", "--config", pair)
    case("topic", "alter", "plain", "--config", pair)
case("topic", "alter", "plain")
case("topic", "alter", "comp", "--config", "min.compaction.lag.ms=10", "--config", "max.compaction.lag.ms=5")
# a header name is matched exactly: one the trim would change, or no UTF-8 (undecodable argv bytes)
HEADER_NAMES = [" ver ", "ver ", "\tver", "v\udcffer", "\udce9"]
for header in HEADER_NAMES:
    case("topic", "create", "newtopic", "--partitions", "1", "--config", "cleanup.policy=compact",
         "--config", "compaction.strategy=header", "--config", f"compaction.strategy.header={header}")
    case("topic", "alter", "comp", "--config", "compaction.strategy=header",
         "--config", f"compaction.strategy.header={header}")

# --- JSON lines and encodings -----------------------------------------------------------------
for line in ["not json", "[1, 2]", '"str"', "1", "null", '{"key": 1}', '{"value": []}', '{"value": {"a": 1}}',
             '{"key": "k", "value": "v", "extra": 1}', '{"timestamp": -1}', '{"timestamp": "x"}',
             '{"timestamp": 1.5}', '{"timestamp": true}', '{"timestamp": 9223372036854775808}',
             '{"timestamp": 99999999999999999999}', '{"headers": "x"}', '{"headers": [["a"]]}',
             '{"headers": [[1, "v"]]}', '{"headers": [["a", 1]]}', '{"headers": {"a": "b"}}',
             '{"headers": [["a", "b", "c"]]}', '{"key": "\\ud800"}', '{"value": "\\udfff"}',
             '{"headers": [["\\ud800", "v"]]}', '{"headers": [["h", "\\udc00"]]}', '{"key": "k"',
             '{"key": "k", "value": "v"}\nnot json', '{"key": "k", "value": "v"}\n{"value": 5}',
             '{"key": ' + "[" * 100_000 + "]" * 100_000 + "}"]:
    case("produce", "plain", "--partition", "0", stdin=line + "\n")
for line in ['{"key": "!!"}', '{"value": "abc"}', '{"headers": [["h", "***"]]}', '{"key": "\\ud800"}']:
    case("produce", "plain", "--partition", "0", "--encoding", "base64", stdin=line + "\n")
case("produce", "plain", "--partition", "0", stdin="")
case("produce", "plain", "--partition", "0", stdin="\n\n  \n")
case("produce", "comp", "--partition", "0", stdin='{"key": null, "value": "v"}\n')
case("produce", "plain", "--partition", "0", stdin=json.dumps({"key": "k", "value": "v" * 1_100_000}) + "\n")
case("produce", "plain", "--partition", "0", "--compression", "rar", stdin=GOOD)
case("produce", "plain", "--partition", "0", "--encoding", "utf16", stdin=GOOD)
case("consume", "plain", "--partition", "0", "--encoding", "hex")

# --- file names -------------------------------------------------------------------------------
for path in ["{files}/good.index", "{files}/x.timeindex", "{files}/noext", "{files}/missing.log", "{files}",
             "{files}/garbage-checkpoint", "/dev/null", "", "{files}/a\x00b.log", "{files}/fifo.log"]:
    case("dump", path)
case("dump")

# --- usage and environment --------------------------------------------------------------------
case("bogus-command")
case("topic")
case("topic", "create", "newtopic")
case("--bogus-flag", "topic", "list")
case("retention", "--engine", "bogus")
case("retention", "--engine", "spark")
case("compact", "--engine", "spark")


def run_case(template: Path, tmp_path: Path, monkeypatch, capsys, argv: list[str], stdin: str,
             log_dirs: str | None = None, plant: Callable[[Path], None] | None = None) -> str:
    """Run one refused command (``plant``: damage made in the copied log dir first); returns
    its error line."""
    root = tmp_path / "logs"
    shutil.copytree(template / "logs", root, symlinks=True)
    if plant is not None:
        plant(root)
    files = template / "files"
    argv = [a.replace("{files}", str(files)) for a in argv]
    before = snapshot(root)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["--log-dirs", log_dirs or str(root), *argv])
    out, err = capsys.readouterr()
    assert code == 1, (argv, out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert snapshot(root) == before, argv
    return err


@pytest.mark.parametrize("argv,stdin", CASES, ids=[f"{i}-{' '.join(a)[:60]!r}" for i, (a, _) in enumerate(CASES)])
def test_bad_input_is_refused_and_changes_nothing(template, tmp_path, monkeypatch, capsys, argv, stdin):
    run_case(template, tmp_path, monkeypatch, capsys, argv, stdin)


@pytest.mark.parametrize("header", HEADER_NAMES)
@pytest.mark.parametrize("command", [["topic", "create", "newtopic", "--partitions", "1"], ["topic", "alter", "comp"]])
def test_a_refused_header_name_is_named_with_its_config(template, tmp_path, monkeypatch, capsys, command, header):
    """``compaction.strategy.header`` with surrounding whitespace was trimmed without a word (so
    the strategy read another header than the one named), and one with undecodable bytes failed
    with a codec error that named no config: each refusal names the key and the value."""
    err = run_case(template, tmp_path, monkeypatch, capsys, [*command, "--config", "cleanup.policy=compact",
                   "--config", "compaction.strategy=header", "--config", f"compaction.strategy.header={header}"], "")
    assert err.startswith(f"error: Invalid value {header!r} for configuration compaction.strategy.header: "), err


@pytest.mark.parametrize("command", [["consume", "plain", "--partition", "1"], ["topic", "describe", "plain"],
                                     ["produce", "plain", "--partition", "1"], ["retention"], ["compact"],
                                     ["delete-records", "plain", "--partition", "1", "--before-offset", "0"],
                                     ["topic", "create", "newtopic", "--partitions", "1"], ["topic", "delete", "plain"],
                                     ["topic", "alter", "plain", "--partitions", "3"],
                                     ["topic", "alter", "plain", "--config", "retention.ms=5"],
                                     ["topic", "alter", "plain", "--delete-config", "retention.ms"]])
def test_a_malformed_checkpoint_refuses_every_command_that_uses_its_log_dir(template, tmp_path, monkeypatch, capsys,
                                                                           command):
    """The log dir is offline: no partition of it is read or written, no topic changed."""
    def plant(root: Path) -> None:
        (root / "recovery-point-offset-checkpoint").write_text("0\n1\nplain 1 x\n")
    err = run_case(template, tmp_path, monkeypatch, capsys, command, GOOD, plant=plant)
    assert "Malformed line 3 in checkpoint file " in err and "recovery-point-offset-checkpoint" in err, err


@pytest.mark.parametrize("props", ["missing.properties", "bad.properties", "zero-partitions.properties",
                                   "latin1.properties", "bad-escape.properties", "continued.properties"])
def test_bad_server_properties_are_refused(template, tmp_path, monkeypatch, capsys, props):
    monkeypatch.setenv("LOGPLAT_SERVER_PROPERTIES", str(template / "files" / props))
    run_case(template, tmp_path, monkeypatch, capsys, ["topic", "create", "newtopic", "--partitions", "1"], "")


@pytest.mark.parametrize("log_dirs", [",", " , ", "{root},{root}", "{root},{root}/", "{root}/plain-0"])
def test_bad_log_dirs_are_refused(template, tmp_path, monkeypatch, capsys, log_dirs):
    run_case(template, tmp_path, monkeypatch, capsys, ["topic", "list"], "",
             log_dirs=log_dirs.replace("{root}", str(tmp_path / "logs")))


@pytest.mark.parametrize("log_dirs", [" , ", "{root},{root}/", "{root}/plain-0"])
def test_bad_log_dirs_in_the_environment_are_refused_naming_the_variable(template, tmp_path, monkeypatch, capsys,
                                                                         log_dirs):
    """``LOGPLAT_LOG_DIRS`` is checked by the rules ``--log-dirs`` is (``logdir.environment``),
    and the error names the variable and its value."""
    root = tmp_path / "logs"
    shutil.copytree(template / "logs", root, symlinks=True)
    before = snapshot(root)
    value = log_dirs.replace("{root}", str(root))
    monkeypatch.setenv("LOGPLAT_LOG_DIRS", value)
    assert main(["topic", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: LOGPLAT_LOG_DIRS={value!r}: ") and err.count("\n") == 1, err
    assert snapshot(root) == before


@pytest.mark.parametrize("inner", ["y-0", "nested"])
@pytest.mark.parametrize("order", ["outer first", "inner first"])
def test_a_log_dir_inside_another_is_refused(template, tmp_path, monkeypatch, capsys, inner, order):
    """``--log-dirs d1,d1/y-0`` (an empty directory named like a partition of the topic being
    created): the create was refused as "already exists" after it had written segment files
    into the inner log dir, and a fresh inner dir got a clean-shutdown marker."""
    root = tmp_path / "logs"
    shutil.copytree(template / "logs", root, symlinks=True)
    (root / inner).mkdir()
    dirs = [str(root), str(root / inner)]
    log_dirs = ",".join(dirs if order == "outer first" else reversed(dirs))
    before = snapshot(root)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code = main(["--log-dirs", log_dirs, "topic", "create", "y", "--partitions", "1"])
    err = capsys.readouterr().err
    assert code == 1 and err == f"error: log dir {root / inner} is inside log dir {root}: give log dirs that do not nest\n"
    assert snapshot(root) == before


def test_the_suite_tries_at_least_150_inputs():
    assert len(CASES) + 4 + 3 >= 150


REAL_CASES: list[tuple[list[str], bytes]] = [
    (["produce", "plain", "--partition", "0"], b"\xff\xfe{\"key\": \"k\"}\n"),  # not UTF-8 at all
    (["produce", "plain", "--partition", "0"], b'{"key": "\\ud800", "value": "v"}\n'),
    (["topic", "create", "..", "--partitions", "1"], b""),
    (["consume", "plain", "--partition", "x"], b""),
    (["compact", "--now-ms", "99999999999999999999"], b""),
    (["dump", "{files}/good.index"], b""),
]


@pytest.mark.parametrize("argv,stdin", REAL_CASES, ids=[" ".join(a) for a, _ in REAL_CASES])
def test_the_real_logctl_refuses_bad_input(template, tmp_path, argv, stdin):
    root = tmp_path / "logs"
    shutil.copytree(template / "logs", root, symlinks=True)
    before = snapshot(root)
    argv = [a.replace("{files}", str(template / "files")) for a in argv]
    logctl = Path(sys.executable).with_name("logctl")
    proc = subprocess.run([str(logctl), "--log-dirs", str(root), *argv], input=stdin, capture_output=True, cwd=REPO)
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert snapshot(root) == before


@pytest.mark.parametrize("argv,stdin", [(["topic", "create", "a", "--partitions", "2"], b""),
                                        (["produce", "plain", "--partition", "0"], GOOD.encode())])
def test_one_log_dir_under_two_paths_is_refused_not_waited_on(template, tmp_path, argv, stdin):
    """The same directory given twice through a bind mount: the writer waited for ever on the
    lock it already held through the first path (``d1,d1`` and a symlink were refused, being
    one path once resolved). The dirs' device and inode now tell."""
    root, bound = tmp_path / "logs", tmp_path / "bound"
    shutil.copytree(template / "logs", root, symlinks=True)
    bound.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(root), str(bound)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({mounted.stderr.strip()}): the test needs one directory under two paths")
    try:
        before = snapshot(root)
        logctl = Path(sys.executable).with_name("logctl")
        proc = subprocess.run([str(logctl), "--log-dirs", f"{root},{bound}", *argv], input=stdin, capture_output=True,
                              cwd=REPO, timeout=60)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1 and "are the same directory" in err, err
        assert snapshot(root) == before
    finally:
        subprocess.run(["umount", "-l", str(bound)], check=False)


# --- a hostile edit of one topic's metadata file ----------------------------------------------
HOSTILE_METADATA = {
    "partitions 0": '{"name": "comp", "partitions": 0}',
    "partitions above the ceiling": '{"name": "comp", "partitions": 100000}',
    "partitions a string": '{"name": "comp", "partitions": "1"}',
    "partitions a float": '{"name": "comp", "partitions": 1.5}',
    "partitions NaN": '{"name": "comp", "partitions": NaN}',
    "another topic's name": '{"name": "plain", "partitions": 1}',
    "no name": '{"partitions": 1}',
    "a config as a number": '{"name": "comp", "partitions": 1, "configs": {"cleanup.policy": 1}}',
    "placed over no log dir id": '{"name": "comp", "partitions": 1, "placed_over": {"x": "/elsewhere"}}',
    "a list": "[]",
    "null": "null",
    "empty": "",
    "garbage": "{{not json",
    "too deep": "[" * 100_000,
    "partitions of 5,000 digits": '{"name": "comp", "partitions": ' + "9" * 5000 + "}",
    "a config given twice": '{"name": "comp", "partitions": 1, "configs": {"retention.ms": "604800000", '
                            '"retention.ms": "1"}}',
    "partitions given twice": '{"name": "comp", "partitions": 1, "partitions": 2}',
}


def _hostile(template: Path, tmp_path: Path, edit: str) -> Path:
    root = tmp_path / "logs"
    shutil.copytree(template / "logs", root, symlinks=True)
    (root / ".logplat-topics" / "comp.json").write_text(HOSTILE_METADATA[edit])
    return root


@pytest.mark.parametrize("edit", HOSTILE_METADATA)
@pytest.mark.parametrize("argv", [["topic", "describe", "comp"], ["consume", "comp", "--partition", "0"],
                                  ["verify", "--topic", "comp"], ["retention", "--topic", "comp"],
                                  ["compact", "--topic", "comp"], ["erasure-report", "--topic", "comp"],
                                  ["topic", "alter", "comp", "--partitions", "2"]])
def test_a_topic_whose_metadata_is_refused_is_refused_where_it_is_used(template, tmp_path, monkeypatch, capsys,
                                                                       edit, argv):
    root = _hostile(template, tmp_path, edit)
    before = snapshot(root)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code = main(["--log-dirs", str(root), *argv])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith(f"error: topic metadata file {root / '.logplat-topics' / 'comp.json'} is "), err
    assert snapshot(root) == before


@pytest.mark.parametrize("edit", HOSTILE_METADATA)
def test_a_topic_whose_metadata_is_refused_stops_no_other_topic_and_can_be_deleted(template, tmp_path, monkeypatch,
                                                                                   capsys, edit):
    """Every command over all topics went down on one topic's bad metadata file, so no other
    topic's retention ever ran again, and ``topic delete`` could not remove it. They go on with
    the rest, name it on one error line and exit 1; ``topic delete`` removes it."""
    root = _hostile(template, tmp_path, edit)
    before = snapshot(root)
    for argv, shows in ((["topic", "list"], "plain"), (["verify"], "plain-1: OK"),
                        (["retention", "--now-ms", "2000"], "plain-1: nothing to delete"),
                        (["compact", "--dry-run", "--now-ms", "2000"], ""), (["compact", "--now-ms", "2000"], ""),
                        (["erasure-report", "--now-ms", "2000"], "")):
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        code = main(["--log-dirs", str(root), *argv])
        out, err = capsys.readouterr()
        assert code == 1 and shows in out, (argv, out, err)
        assert err.count("\n") == 1, (argv, err)
        assert err.startswith(f"error: topic comp passed over: topic metadata file {root / '.logplat-topics'}"), err
        assert snapshot(root) == before, argv
    for argv in (["verify", "--json"], ["erasure-report", "--json", "--now-ms", "2000"]):
        assert main(["--log-dirs", str(root), *argv]) == 1 and json.loads(capsys.readouterr().out)["ok"] is False
    assert main(["--log-dirs", str(root), "topic", "delete", "comp"]) == 0
    assert not list(root.glob("comp-*")) and not (root / ".logplat-topics" / "comp.json").exists()
    assert main(["--log-dirs", str(root), "verify"]) == 0
