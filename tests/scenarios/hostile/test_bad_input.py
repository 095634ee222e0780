"""Bad input to ``logctl``: no traceback, no silent nonsense (lone surrogates, clocks past int64,
index names without an offset, unknown topics for maintenance, negative counts, the dry-run
log start offset, and a corrupt batch in the middle of an unlimited consume)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from storage_engine.errors import CheckpointError, InvalidSegmentNameError, NotRegularFileError
from tests.helpers.cli import run_logctl
from tests.helpers.engine import partition_stats
from tests.helpers.paths import REPO
from tests.scenarios.hostile.test_adversarial_cli import snapshot

RECORD = json.dumps({"key": "k", "value": "v"}) + "\n"


@pytest.fixture
def logctl(logctl):
    """The log-layer ``logctl`` with a compacted topic ``t`` created."""
    logctl("topic", "create", "t", "--partitions", "1", "--config", "cleanup.policy=compact")
    return logctl


def one_line_error(code: int, err: str) -> None:
    assert code == 1 and err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("line", [
    '{"key": "\\ud800", "value": "v"}',
    '{"key": "k", "value": "\\udfff"}',
    '{"key": "k", "value": "v", "headers": [["\\ud800", "v"]]}',
    '{"key": "k", "value": "v", "headers": [["h", "\\ud800"]]}',
])
def test_lone_surrogates_are_an_error(logctl, line):
    code, _, err = logctl("produce", "t", "--partition", "0", stdin=line + "\n")
    one_line_error(code, err)
    assert "Unicode" in err


@pytest.mark.parametrize("command", [
    ["produce", "t", "--partition", "0", "--now-ms", "99999999999999999999"],
    ["produce", "t", "--partition", "0", "--now-ms", "-1"],
    ["compact", "--now-ms", "99999999999999999999"],
    ["compact", "--now-ms", "9223372036854775807"],
    ["retention", "--now-ms", "-5"],
    ["consume", "t", "--partition", "0", "--max-records", "-1"],
    ["consume", "t", "--partition", "0", "--from-timestamp", "-1"],
])
def test_out_of_range_numbers_are_an_error(logctl, command):
    code, _, err = logctl(*command, stdin=RECORD)
    one_line_error(code, err)
    assert "between" in err


def test_record_timestamp_past_int64_is_an_error(logctl):
    code, _, err = logctl("produce", "t", "--partition", "0", stdin='{"key": "k", "value": "v", "timestamp": 99999999999999999999}\n')
    one_line_error(code, err)


def test_dump_of_an_index_without_an_offset_is_an_error(logctl, tmp_path):
    good = logctl.root / "t-0" / "00000000000000000000.index"
    copy = tmp_path / "good.index"
    copy.write_bytes(good.read_bytes() if good.exists() else b"")
    code, _, err = logctl("dump", str(copy))
    one_line_error(code, err)
    assert str(copy) in err


def test_dump_names_what_is_not_a_regular_file(logctl, tmp_path):
    """``dump`` of a FIFO or a directory said "no such file" about a path that exists."""
    os.mkfifo(tmp_path / "fifo.log")
    for path, kind in ((tmp_path / "fifo.log", "a FIFO"), (logctl.root / "t-0", "a directory")):
        code, _, err = logctl("dump", str(path))
        one_line_error(code, err)
        assert f"{path} is {kind}: only a regular file can be dumped" in err, err


@pytest.mark.parametrize("command", ["compact", "retention"])
def test_maintenance_of_an_unknown_topic_is_an_error(logctl, command):
    code, _, err = logctl(command, "--topic", "nosuch")
    one_line_error(code, err)
    assert "nosuch" in err


def test_retention_dry_run_names_the_new_log_start_offset(logctl):
    assert logctl("topic", "create", "r", "--partitions", "1", "--config", "retention.ms=1000")[0] == 0
    assert logctl("produce", "r", "--partition", "0", "--now-ms", "1000", stdin=RECORD * 3)[0] == 0
    code, out, err = logctl("retention", "--topic", "r", "--now-ms", "100000", "--dry-run")
    assert code == 0, err
    assert "would delete 1 segment" in out and "None" not in out, out


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", [["retention", "--dry-run", "--now-ms", "100000"],
                                     ["compact", "--dry-run", "--now-ms", "100000"]])
def test_a_dry_run_changes_nothing_even_where_recovery_would(logctl, tmp_path, command):
    """After an unclean shutdown with a torn batch at the end, a dry run reports what it would
    do without recovering anything (a writable open would truncate the tail and write the
    clean-shutdown marker); nor does it create a log dir that is not there."""
    assert logctl("topic", "create", "r", "--partitions", "1", "--config", "retention.ms=1000")[0] == 0
    for name in ("r", "t"):
        assert logctl("produce", name, "--partition", "0", "--now-ms", "1000", stdin=RECORD * 3)[0] == 0
        with open(logctl.root / f"{name}-0" / "00000000000000000000.log", "ab") as f:
            f.write(b"\0\0\0\0\0\0\0\x05\0\0")  # a torn batch header
    (logctl.root / ".kafka_cleanshutdown").unlink()
    before = _tree(logctl.root)
    code, out, err = logctl(*command)
    assert code == 0, err
    assert _tree(logctl.root) == before
    missing = tmp_path / "no-such-dir"
    code, out, err = logctl("--log-dirs", str(missing), *command)
    assert err == f"error: log dir {missing} does not exist\n" and code == 1 and not missing.exists()


def test_retention_previews_what_it_does_with_a_log_start_checkpoint_past_the_log_end(logctl):
    """A log start checkpoint beyond the log end is damage the writable open ignores; the dry
    run planned from it ("would delete 2 segment(s) ... log start offset -> 500") and the real
    run then found the log changed and deleted nothing."""
    assert logctl("topic", "create", "d", "--partitions", "1", "--config", "segment.bytes=400")[0] == 0
    assert logctl("produce", "d", "--partition", "0", "--now-ms", "1000", "--batch-size", "3", stdin=RECORD * 30)[0] == 0
    _with_extra_line(logctl.root / "log-start-offset-checkpoint", "d 0 500")
    code, preview, err = logctl("retention", "--topic", "d", "--now-ms", "2000", "--dry-run")
    assert code == 0, err
    assert preview == "d-0: nothing to delete\n"
    code, done, err = logctl("retention", "--topic", "d", "--now-ms", "2000")
    assert (code, done, err) == (0, preview, "")


@pytest.mark.parametrize("command", [["verify"], ["topic", "list"], ["consume", "t", "--partition", "0"],
                                     ["retention"], ["compact"], ["compact", "--partition", "0"],
                                     ["produce", "t", "--partition", "0"], ["topic", "delete", "t"],
                                     ["delete-records", "t", "--partition", "0", "--before-offset", "0"]])
def test_a_log_dir_that_is_not_there_is_an_error_not_an_empty_log_dir(logctl, tmp_path, command):
    """A mistyped --log-dirs read as a log dir without topics ("no partitions", exit 0); an empty
    one fell back to ./data/logs. A writable command made the mistyped directory, and reported
    success on it ("No partitions"), or failed and left it made."""
    code, _, err = logctl("--log-dirs", str(tmp_path / "typo"), *command)
    assert (code, err) == (1, f"error: log dir {tmp_path / 'typo'} does not exist\n")
    (tmp_path / "a-file").write_text("")
    code, _, err = logctl("--log-dirs", str(tmp_path / "a-file"), *command)
    assert (code, err) == (1, f"error: log dir {tmp_path / 'a-file'} is not a directory\n")
    code, _, err = logctl("--log-dirs", "", *command)
    assert (code, err) == (1, "error: no log directory in ''\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "logs"]  # "logs": the fixture's topic


@pytest.mark.parametrize("args", [["--config", "retention.ms=abc"], ["--config", "retention.ms"],
                                  ["--partitions", "0"], ["--config", "segment.index.bytes=8"]])
def test_a_refused_topic_create_makes_no_log_dir(logctl, tmp_path, args):
    """``topic create`` is the one command that makes a log dir that is not there yet (a first
    run); refused for its input, it made the directory, its locks and its shutdown marker."""
    new = tmp_path / "new" / "logs"
    code, _, err = logctl("--log-dirs", str(new), "topic", "create", "x", *(["--partitions", "1"] * ("--partitions"
                                                                                                  not in args)), *args)
    one_line_error(code, err)
    assert not (tmp_path / "new").exists()
    assert logctl("--log-dirs", str(new), "topic", "create", "x", "--partitions", "1")[0] == 0
    (tmp_path / "a-file").write_text("")  # and a file is no log dir to make: it said "[Errno 20] Not a directory"
    code, _, err = logctl("--log-dirs", str(tmp_path / "a-file"), "topic", "create", "x", "--partitions", "1")
    assert (code, err) == (1, f"error: log dir {tmp_path / 'a-file'} is not a directory\n")


def test_consume_prints_the_good_records_before_a_corrupt_batch(logctl):
    for _ in range(3):
        assert logctl("produce", "t", "--partition", "0", "--batch-size", "1", stdin=RECORD * 2)[0] == 0
    log_file = logctl.root / "t-0" / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    data[-3] ^= 0xFF  # a record byte of the last batch: its CRC no longer matches
    log_file.write_bytes(bytes(data))
    code, out, err = logctl("consume", "t", "--partition", "0")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [0, 1, 2, 3, 4]
    one_line_error(code, err)
    assert "CRC" in err or "crc" in err


def test_consume_stops_with_an_error_at_a_base_offset_damaged_past_the_log_end(logctl):
    """Offsets 12 to 999 held by no batch: the records before are printed, then the gap is an
    error (it ended the output silently, exit 0, as if the log ended there)."""
    assert logctl("topic", "create", "g", "--partitions", "1", "--config", "segment.bytes=400")[0] == 0
    assert logctl("produce", "g", "--partition", "0", "--batch-size", "3", stdin=RECORD * 30)[0] == 0
    with open(logctl.root / "g-0" / "00000000000000000012.log", "r+b") as f:
        f.write((1000).to_bytes(8, "big"))  # the first batch's base offset (outside its CRC)
    code, out, err = logctl("consume", "g", "--partition", "0")
    assert [json.loads(line)["offset"] for line in out.splitlines()] == list(range(12))
    one_line_error(code, err)
    assert "offsets 12 to 999 are missing" in err
    code, out, err = logctl("consume", "g", "--partition", "0", "--from-offset", "12")
    assert out == ""
    one_line_error(code, err)


def test_the_real_logctl_gives_one_line_errors(tmp_path):
    logctl = Path(sys.executable).with_name("logctl")
    proc = subprocess.run([str(logctl), "--log-dirs", str(tmp_path / "logs"), "produce", "t", "--partition", "x"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "--partition" in proc.stderr, proc.stderr


def _with_extra_line(checkpoint: Path, line: str) -> None:
    """Add ``line`` to a checkpoint file in Kafka's format (the entry count follows)."""
    entries = checkpoint.read_text().splitlines()[2:] if checkpoint.exists() else []
    entries.append(line)
    checkpoint.write_text("\n".join(["0", str(len(entries)), *entries]) + "\n")


@pytest.mark.parametrize("checkpoint", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                        "cleaner-offset-checkpoint"])
@pytest.mark.parametrize("command", [["produce", "t", "--partition", "0"], ["compact", "--now-ms", "99999999999999"],
                                     ["topic", "delete", "t"]])
def test_a_checkpoint_line_with_an_illegal_topic_is_refused_before_anything_changes(logctl, checkpoint, command):
    """``../../etc 0 5`` used to be accepted when read and refused only when the file was
    rewritten: produce had appended, compact had swapped, topic delete had renamed the
    partition dirs (and unlisted the topic) before the command failed."""
    assert logctl("topic", "alter", "t", "--config", "segment.bytes=200")[0] == 0
    for _ in range(6):  # several segments of one key: a compaction is due
        assert logctl("produce", "t", "--partition", "0", "--now-ms", "1000", stdin=RECORD * 2)[0] == 0
    assert logctl("delete-records", "t", "--partition", "0", "--before-offset", "1")[0] == 0
    path = logctl.root / checkpoint
    _with_extra_line(path, "../../etc 0 5")
    before = snapshot(logctl.root)
    code, _, err = logctl(*command, stdin=RECORD)
    one_line_error(code, err)
    assert f"in checkpoint file {path}" in err and "Malformed line" in err and "'../../etc' is illegal" in err, err
    assert snapshot(logctl.root) == before
    assert "t" in logctl("topic", "list")[1].split()


@pytest.mark.parametrize("content", [b"garbage\n", b"0\n1\nt 0\n", b"0\n1\na b 0 1\n"])
def test_topic_delete_with_a_malformed_checkpoint_changes_nothing(logctl, content):
    """The checkpoints a delete rewrites are parsed before its commit point (it used to rename
    the partition dirs and unlist the topic, then fail with "Malformed version line")."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    (logctl.root / "recovery-point-offset-checkpoint").write_bytes(content)
    before = snapshot(logctl.root)
    code, _, err = logctl("topic", "delete", "t")
    one_line_error(code, err)
    assert "recovery-point-offset-checkpoint" in err
    assert snapshot(logctl.root) == before


def test_a_garbage_index_is_reported_by_verify_and_read_past(logctl):
    """An index entry at a negative position made verify and describe fail with a bare
    "[Errno 22] Invalid argument" (a pread at that position). The read-only view now leaves an
    index that fails its sanity check out, verify names it and what a writable open does, and
    that open rebuilds it."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD * 2)[0] == 0
    index = logctl.root / "t-0" / "00000000000000000000.index"
    index.write_bytes(b"\x00\x00\x00\x00\xff\xff\xff\xf0")  # offset 0 at position -16
    before = snapshot(logctl.root)
    code, out, err = logctl("verify")
    assert code == 1 and "Errno" not in out + err, (out, err)
    assert f"({index}) has entry 0 at position -16" in out and "writable open rebuilds" in out, out
    code, out, err = logctl("topic", "describe", "t", "--json")
    assert code == 0 and json.loads(out)["partitions"][0]["log_end_offset"] == 2, err
    code, out, _ = logctl("consume", "t", "--partition", "0")
    assert code == 0 and [json.loads(line)["offset"] for line in out.splitlines()] == [0, 1]
    assert snapshot(logctl.root) == before  # read-only commands changed nothing
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    assert logctl("verify")[0] == 0


@pytest.mark.parametrize("name", ["5.log", "5.index", "000000000000000000005.log", "5.log.swap"])
def test_a_segment_file_name_without_20_digits_is_refused_naming_it(logctl, name):
    """``5.log`` was read as segment 5 and then opened as ``00000000000000000005.log``: "No such
    file or directory" about a file nobody named. Kafka's segment names are exactly 20 digits;
    another name of a segment's kind is refused, naming it, before anything changes."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    part = logctl.root / "t-0"
    (part / name).write_bytes((part / "00000000000000000000.log").read_bytes())
    before = snapshot(logctl.root)
    for command in (["verify"], ["consume", "t", "--partition", "0"], ["topic", "describe", "t"],
                    ["produce", "t", "--partition", "0"], ["retention", "--now-ms", "999999999999"]):
        code, out, err = logctl(*command, stdin=RECORD)
        assert code == 1, (command, out, err)
        assert f"{part / name}: not a segment file name" in out + err and "No such file" not in out + err, (command, out, err)
    with pytest.raises(InvalidSegmentNameError, match=f"{part / name}: not a segment file name"):
        partition_stats(logctl.root)  # the sensors' stats refuse it as the commands do
    assert snapshot(logctl.root) == before


def test_a_directory_where_a_later_segments_file_belongs_is_refused_before_any_repair(logctl):
    """A directory in place of the last segment's time index was refused only when the load
    reached that segment, after it had rebuilt the first segment's missing index; now every
    entry is checked before anything changes, by the load and by the sensors' stats alike."""
    assert logctl("topic", "alter", "t", "--config", "segment.bytes=200")[0] == 0
    for _ in range(3):  # one batch each, one segment each
        assert logctl("produce", "t", "--partition", "0", stdin=RECORD * 4)[0] == 0
    part = logctl.root / "t-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 2, logs
    logs[0].with_suffix(".index").unlink()  # a writable open would rebuild it
    last = logs[-1].with_suffix(".timeindex")
    last.unlink()
    last.mkdir()
    before = snapshot(logctl.root)
    for command in (["produce", "t", "--partition", "0"], ["verify"], ["compact", "--topic", "t"]):
        code, out, err = logctl(*command, stdin=RECORD)
        assert code == 1 and f"{last} is a directory" in out + err, (command, out, err)
        assert snapshot(logctl.root) == before, command
    with pytest.raises(NotRegularFileError, match=f"{last} is a directory"):
        partition_stats(logctl.root)


def test_the_stats_ignore_what_the_load_ignores(logctl):
    """A name with non-ASCII digits is no segment's (Kafka's names are ASCII): the stats counted
    ``００...0.log`` as a segment (``str.isdigit``) that every command leaves out."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    part = logctl.root / "t-0"
    (part / ("\uff10" * 20 + ".log")).write_bytes((part / "00000000000000000000.log").read_bytes())
    [stats] = partition_stats(logctl.root)
    assert [s.base_offset for s in stats.segments] == [0]
    code, out, _ = logctl("topic", "describe", "t", "--json")
    assert code == 0 and json.loads(out)["partitions"][0]["log_end_offset"] == 1


def test_a_partition_directory_given_as_the_log_dir_is_refused(logctl, monkeypatch, capsys):
    """``--log-dirs data/logs/t-0`` showed "no partitions" with exit 0 to read-only commands,
    and writable ones wrote a session lock and the clean-shutdown marker into the partition."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    part = logctl.root / "t-0"
    before = snapshot(logctl.root)
    for command in (["verify"], ["topic", "list"], ["retention"], ["compact"], ["consume", "t", "--partition", "0"],
                    ["retention", "--dry-run"], ["topic", "create", "u", "--partitions", "1"]):
        code, _, err = run_logctl(part, monkeypatch, capsys, *command)
        one_line_error(code, err)
        assert f"{part} holds segment files" in err and f"give the directory that holds it ({logctl.root})" in err
        assert snapshot(logctl.root) == before, command


def test_verify_names_a_directory_of_segments_that_no_command_reads(logctl):
    """``t-01`` (Kafka would read it as partition 1), ``t-2147483648``: left out by every command
    and by ``verify`` too, which passed. A directory without segment files is no concern."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    for name in ("t-01", "t-2147483648"):
        shutil.copytree(logctl.root / "t-0", logctl.root / name)
    (logctl.root / "notes").mkdir()
    (logctl.root / "notes" / "readme.txt").write_text("not a partition")
    code, out, _ = logctl("verify")
    assert code == 1 and out.splitlines()[0].startswith("t-0: OK")
    assert [line.split(":")[0] for line in out.splitlines()[1:]] == [str(logctl.root / "t-01"),
                                                                       str(logctl.root / "t-2147483648")]
    assert "no command reads it; rename it" in out
    code, out, _ = logctl("verify", "--json")
    assert code == 1 and json.loads(out)["misnamed_dirs"] == [str(logctl.root / "t-01"), str(logctl.root / "t-2147483648")]


def test_the_topic_metadata_folder_given_as_the_log_dir_is_refused(logctl, monkeypatch, capsys):
    """``--log-dirs data/logs/.logplat-topics topic create x`` built a log dir inside it."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    folder = logctl.root / ".logplat-topics"
    before = snapshot(logctl.root)
    for command in (["topic", "create", "x", "--partitions", "1"], ["topic", "list"], ["verify"]):
        code, _, err = run_logctl(folder, monkeypatch, capsys, *command)
        one_line_error(code, err)
        assert f"{folder} is the topic metadata folder of a log dir" in err and f"({logctl.root})" in err
        assert snapshot(logctl.root) == before, command


@pytest.mark.parametrize("name", ["log-start-offset-checkpoint", "cleaner-offset-checkpoint",
                                  "recovery-point-offset-checkpoint"])
def test_the_dry_runs_and_the_stats_refuse_a_malformed_checkpoint_as_the_runs_do(logctl, name):
    """The partition stats took a malformed checkpoint for an empty one, so ``--dry-run`` (exit
    0) and the sensors planned runs that every writable command then refused."""
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    (logctl.root / name).write_text("1\n1\nt 0 10\n")
    before = snapshot(logctl.root)
    for command in (["retention", "--dry-run"], ["compact", "--dry-run"], ["retention"], ["compact"], ["verify"]):
        code, out, err = logctl(*command)
        assert code == 1 and f"checkpoint file at: {logctl.root / name}" in out + err, (command, out, err)
    with pytest.raises(CheckpointError, match="Unrecognised version"):
        partition_stats(logctl.root)
    assert snapshot(logctl.root) == before


def test_the_topic_metadata_folder_and_its_temporary_files_are_checked_by_kind(logctl, monkeypatch, capsys, tmp_path):
    """A directory left where a metadata write's temporary file goes failed ``topic alter`` and
    ``topic create`` with "[Errno 21] Is a directory"; a file named ``.logplat-topics`` failed
    every command with "[Errno 20] Not a directory". Both are named now, nothing changed."""
    (logctl.root / ".logplat-topics" / "t.json.tmp").mkdir()
    before = snapshot(logctl.root)
    for command in (["topic", "alter", "t", "--config", "retention.ms=5"], ["topic", "create", "n", "--partitions", "1"]):
        code, _, err = logctl(*command)
        one_line_error(code, err)
        assert f"{logctl.root / '.logplat-topics' / 't.json.tmp'} is a directory" in err
        assert snapshot(logctl.root) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / ".logplat-topics").write_text("")
    for command in (["topic", "create", "n", "--partitions", "1"], ["topic", "list"], ["verify"]):
        code, _, err = run_logctl(other, monkeypatch, capsys, *command)
        one_line_error(code, err)
        assert f"{other / '.logplat-topics'} is a regular file, where a directory belongs" in err


def test_a_missing_partition_directory_is_named_as_missing(logctl):
    """Partition 1 of a two-partition topic without its directory said "Partition 1 of topic u
    does not exist (partitions: [0, 1])", contradicting itself; read-only commands now say the
    directory is missing and what a writable command would do."""
    assert logctl("topic", "create", "u", "--partitions", "2")[0] == 0
    (logctl.root / "u-1").rename(logctl.root.parent / "u-1.away")
    for command in (["consume", "u", "--partition", "1"], ["topic", "describe", "u"], ["verify", "--topic", "u"]):
        code, out, err = logctl(*command)
        assert code == 1 and "The directory u-1 of partition 1 of topic u is missing" in out + err, (command, out, err)
        assert "does not exist" not in out + err
    code, _, err = logctl("consume", "u", "--partition", "2")
    one_line_error(code, err)
    assert "Partition 2 of topic u does not exist (partitions: [0, 1])" in err


@pytest.mark.parametrize("stdin", ["", "not json\n", '{"key": 1}\n'])
def test_a_produce_refused_for_its_input_does_not_open_the_log_dirs(logctl, stdin):
    """Refused input used to be read once the log dirs were open, and that open is itself a
    change: the first opener consumes the clean-shutdown marker and the close writes it again.
    The input is read and checked first now: the marker is the same file, untouched."""
    marker = logctl.root / ".kafka_cleanshutdown"
    before = os.stat(marker)
    code, _, err = logctl("produce", "t", "--partition", "0", stdin=stdin)
    one_line_error(code, err)
    after = os.stat(marker)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
