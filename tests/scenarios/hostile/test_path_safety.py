"""Nothing reaches outside the log dirs: symlinks are refused, never followed, and metadata read
off disk is validated like command-line input. Each test puts a real symlink (or a hostile
metadata file) in a real log dir, runs the real CLI in-process, and checks the outside target
is byte-for-byte untouched and the error names the path."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from storage_engine.errors import NotRegularFileError
from tests.helpers.cli import run_logctl
from tests.helpers.engine import partition_stats

RECORD = json.dumps({"key": "k", "value": "v"}) + "\n"




def tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file bytes, symlink targets, directories and FIFOs (not followed)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif p.is_fifo():
                out[rel] = "fifo"
            else:
                out[rel] = p.read_bytes()
    return out






@pytest.fixture
def outside(tmp_path, monkeypatch, capsys):
    """A victim log dir outside ours, with a topic ``v`` holding data."""
    victim = tmp_path / "victim"
    assert run_logctl(victim, monkeypatch, capsys, "topic", "create", "v", "--partitions", "1",
               "--config", "retention.ms=1", "--config", "cleanup.policy=compact,delete")[0] == 0
    for _ in range(3):
        assert run_logctl(victim, monkeypatch, capsys, "produce", "v", "--partition", "0", "--now-ms", "1000",
                   stdin=RECORD)[0] == 0
    return victim


@pytest.mark.parametrize("command", [
    ["produce", "t", "--partition", "0"],
    ["retention", "--now-ms", "999999999"],
    ["compact", "--now-ms", "999999999"],
    ["delete-records", "t", "--partition", "0", "--before-offset", "1"],
    ["consume", "t", "--partition", "0"],
    ["verify"],
    ["topic", "describe", "t"],
    ["topic", "delete", "t"],
])
def test_symlinked_partition_dir_is_refused(logctl, outside, command):
    assert logctl("topic", "create", "t", "--partitions", "1", "--config", "cleanup.policy=compact,delete",
                  "--config", "retention.ms=1")[0] == 0
    part = logctl.root / "t-0"
    for f in part.iterdir():
        f.unlink()
    part.rmdir()
    part.symlink_to(outside / "v-0", target_is_directory=True)
    before = tree(outside)
    code, out, err = logctl(*command, stdin=RECORD)
    assert code == 1, (out, err)
    assert err.count("\n") == 1 and str(part) in err and "symbolic link" in err, err
    assert tree(outside) == before


@pytest.mark.parametrize("name", ["00000000000000000000.log", "00000000000000000000.index",
                                  "00000000000000000000.timeindex", ".logplat.lock"])
@pytest.mark.parametrize("command", [["produce", "t", "--partition", "0"], ["consume", "t", "--partition", "0"],
                                     ["verify"], ["retention", "--now-ms", "999999999"]])
def test_symlinked_file_in_partition_is_refused(logctl, tmp_path, name, command):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious bytes that must survive" * 10)
    link = logctl.root / "t-0" / name
    link.unlink(missing_ok=True)
    link.symlink_to(victim)
    code, out, err = logctl(*command, stdin=RECORD)
    assert code == 1, (out, err)
    assert str(link) in err and "symbolic link" in err, err
    assert victim.read_bytes() == b"precious bytes that must survive" * 10


@pytest.mark.parametrize("name", ["00000000000000000000.log", "00000000000000000000.index",
                                  "00000000000000000000.timeindex"])
@pytest.mark.parametrize("command", [["produce", "t", "--partition", "0"], ["consume", "t", "--partition", "0"],
                                     ["verify"], ["retention", "--now-ms", "999999999"], ["compact", "--dry-run"]])
def test_a_hard_linked_segment_file_is_refused_and_its_other_name_untouched(logctl, tmp_path, name, command):
    """A segment file hard-linked to a file outside the log dir was appended to (and truncated by
    recovery) under both names; read-only views say what a writable open refuses."""
    assert logctl("topic", "create", "t", "--partitions", "1", "--config", "cleanup.policy=compact")[0] == 0
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    file = logctl.root / "t-0" / name
    victim = tmp_path / "victim.bin"
    victim.write_bytes(file.read_bytes() + b"precious bytes after the batch" * 10)
    file.unlink()
    os.link(victim, file)
    (logctl.root / ".kafka_cleanshutdown").unlink(missing_ok=True)  # the next writable open recovers
    def data() -> dict:  # a session file a writable command registers is not data
        return {k: v for k, v in tree(logctl.root).items() if ".logplat-session." not in k}

    kept, before = victim.read_bytes(), data()
    code, out, err = logctl(*command, stdin=RECORD)
    assert code == 1, (out, err)
    said = out if command == ["verify"] else err  # verify reports on stdout, the others fail in one line
    assert str(file) in said and "has 2 hard links" in said, (out, err)
    assert command == ["verify"] or err.count("\n") == 1, err
    assert victim.read_bytes() == kept and data() == before


def test_a_writable_open_refuses_a_hard_linked_file(tmp_path):
    """Every file the engine writes in place (the partition lock's generation, say) is checked at
    its open, whatever listing came before."""
    from storage_engine.errors import UnsafePathError
    from storage_engine.files.nofollow import open_nofollow

    victim = tmp_path / "victim"
    victim.write_bytes(b"x" * 16)
    os.link(victim, tmp_path / ".logplat.lock")
    with pytest.raises(UnsafePathError, match="has 2 hard links"):
        open_nofollow(tmp_path / ".logplat.lock", os.O_RDWR)
    os.close(open_nofollow(tmp_path / ".logplat.lock", os.O_RDONLY))  # reading changes nothing
    assert victim.read_bytes() == b"x" * 16


def test_nofollow_open_refuses_a_link_made_after_the_scan(tmp_path):
    """The directory check is not the only guard: every open under a log dir uses O_NOFOLLOW."""
    from storage_engine.errors import UnsafePathError
    from storage_engine.log.partition_lock import PartitionLock

    part = tmp_path / "t-0"
    part.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"x" * 16)
    (part / ".logplat.lock").symlink_to(victim)
    lock = PartitionLock(part)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        with lock.hold():
            lock.bump_generation()
    assert victim.read_bytes() == b"x" * 16


@pytest.mark.parametrize("name", [".logplat-session.lock", ".logplat-recovery.lock"])
def test_symlinked_session_lock_is_refused(logctl, tmp_path, name):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"keep")
    lock = logctl.root / name
    lock.unlink()
    lock.symlink_to(victim)
    code, _, err = logctl("produce", "t", "--partition", "0", stdin=RECORD)
    assert code == 1 and str(lock) in err
    assert victim.read_bytes() == b"keep"


@pytest.mark.parametrize("bad_name", ["../../../escaped", "{tmp}/absolute-escape", "other", "t/../u", ""])
def test_metadata_name_from_disk_is_validated(logctl, tmp_path, bad_name):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    meta = logctl.root / ".logplat-topics" / "t.json"
    body = json.loads(meta.read_text())
    bad_name = bad_name.replace("{tmp}", str(tmp_path))
    body["name"] = bad_name
    meta.write_text(json.dumps(body))
    before = tree(tmp_path)
    for command in (["topic", "alter", "t", "--config", "retention.ms=5"], ["topic", "describe", "t"],
                    ["produce", "t", "--partition", "0"]):
        code, _, err = logctl(*command, stdin=RECORD)
        assert code == 1 and str(meta) in err and "name" in err, err
    assert tree(tmp_path) == before
    assert not (tmp_path / "absolute-escape.json").exists()


@pytest.mark.parametrize("field,value", [("partitions", -1), ("partitions", "3"), ("partitions", True),
                                          ("configs", ["a"]), ("configs", {"retention.ms": 5}), ("topic_id", 7)])
def test_metadata_fields_from_disk_are_validated(logctl, field, value):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    meta = logctl.root / ".logplat-topics" / "t.json"
    body = json.loads(meta.read_text())
    body[field] = value
    meta.write_text(json.dumps(body))
    before = tree(logctl.root)
    code, _, err = logctl("topic", "alter", "t", "--config", "retention.ms=5")
    assert code == 1 and str(meta) in err and field in err, err
    assert tree(logctl.root) == before


def test_symlinked_metadata_file_and_dir_are_refused(logctl, tmp_path):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    victim = tmp_path / "victim.json"
    meta = logctl.root / ".logplat-topics" / "t.json"
    victim.write_bytes(meta.read_bytes())
    meta.unlink()
    meta.symlink_to(victim)
    code, _, err = logctl("topic", "describe", "t")
    assert code == 1 and str(meta) in err and "symbolic link" in err
    meta.unlink()
    topics = logctl.root / ".logplat-topics"
    topics.rename(tmp_path / "elsewhere")
    topics.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    before = tree(tmp_path / "elsewhere")
    code, _, err = logctl("topic", "create", "u", "--partitions", "1")
    assert code == 1 and str(topics) in err and "symbolic link" in err
    assert tree(tmp_path / "elsewhere") == before


def test_containment_check_catches_an_escape_through_a_parent(tmp_path):
    """``check_under`` resolves every component, so a link anywhere in the path is caught."""
    from storage_engine.errors import UnsafePathError
    from storage_engine.files.nofollow import check_under

    root = tmp_path / "logs"
    (root / "t-0").mkdir(parents=True)
    (tmp_path / "away").mkdir()
    (root / "hop").symlink_to(tmp_path / "away", target_is_directory=True)
    assert check_under(root / "t-0", root) == (root / "t-0").resolve()
    for escaping in (root / "hop" / "x", root / ".." / "away", Path("/etc")):
        with pytest.raises(UnsafePathError, match="outside the log dir"):
            check_under(escaping, root)


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                  ".logplat-checkpoints.lock", ".logplat-topics.lock"])
def test_symlinked_log_dir_file_is_refused(logctl, tmp_path, name):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    assert logctl("delete-records", "t", "--partition", "0", "--before-offset", "1")[0] == 0
    assert logctl("topic", "alter", "t", "--config", "retention.ms=100000")[0] == 0
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"0\n1\nvictim 0 5\n")
    link = logctl.root / name
    assert link.exists()
    link.unlink()
    link.symlink_to(victim)
    before = tree(logctl.root)
    for command in (["verify"], ["topic", "alter", "t", "--config", "retention.ms=5"],
                    ["produce", "t", "--partition", "0"]):
        code, _, err = logctl(*command, stdin=RECORD)
        if name != ".logplat-topics.lock" or command[0] == "topic":  # only metadata changes take that lock
            assert code == 1 and str(link) in err and "symbolic link" in err, (command, err)
    if name != ".logplat-topics.lock":
        assert tree(logctl.root) == before  # refused before anything was written
    assert victim.read_bytes() == b"0\n1\nvictim 0 5\n"


def test_the_cleaner_lock_refuses_a_link_made_after_the_partition_was_checked(tmp_path):
    """The partition open refuses symlinks it sees; a link made afterwards (a race) is refused by
    the cleaner's own no-follow open instead of being truncated or locked through."""
    from storage_engine.errors import UnsafePathError
    from storage_engine.log.staging import CLEANER_LOCK_FILE, CleanerLock

    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"keep")
    part = tmp_path / "t-0"
    part.mkdir()
    (part / CLEANER_LOCK_FILE).symlink_to(victim)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        CleanerLock(part).acquire()
    assert victim.read_bytes() == b"keep"


def test_the_sensors_state_read_does_not_follow_a_symlinked_partition_dir(logctl, outside):
    """The sensors' cheap stats never read through a partition dir that is a link out of the log
    dir: the read is refused, naming the link, as every engine command refuses it."""
    from platform_assets.logic.state_cache import StateCache
    from storage_engine.errors import UnsafePathError
    from storage_engine.logdir.manager import LogManager

    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    (logctl.root / "t-0").rename(logctl.root.parent / "moved-away")
    (logctl.root / "t-0").symlink_to(outside / "v-0")
    with LogManager([logctl.root], read_only=True) as manager:
        with pytest.raises(UnsafePathError, match=f"^{logctl.root / 't-0'} is a symbolic link"):
            StateCache().read(manager, now_ms=0, ttl_ms=0, refresh_share=1.0)


class _Blocked(BaseException):
    """Raised by the alarm below; not an ``OSError``, so ``logctl`` cannot report it as an error."""


def _run_or_fail_if_blocked(logctl, *command: str, stdin: str = "") -> tuple[int, str, str]:
    """Run a command that must never block: a FIFO opened for reading waits for a writer forever."""
    def expire(signum, frame):
        raise _Blocked(f"{' '.join(command)} blocked (on a FIFO?)")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(15)
    try:
        return logctl(*command, stdin=stdin)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


_PARTITION_FILES = ["00000000000000000050.log", "00000000000000000000.index", "00000000000000000000.timeindex",
                    ".logplat.lock"]
_LOG_DIR_FILES = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint",
                  ".logplat-checkpoints.lock", ".logplat-session.lock", ".logplat-recovery.lock", ".kafka_cleanshutdown",
                  ".logplat-topics/t.json"]
_COMMANDS = [["verify"], ["consume", "t", "--partition", "0"], ["topic", "describe", "t"],
             ["produce", "t", "--partition", "0"], ["retention", "--now-ms", "999999999999"],
             ["delete-records", "t", "--partition", "0", "--before-offset", "1"], ["topic", "delete", "t"]]


@pytest.mark.parametrize("name", [f"t-0/{n}" for n in _PARTITION_FILES] + _LOG_DIR_FILES)
def test_a_fifo_where_a_file_belongs_is_refused_at_once(logctl, name):
    """Every command refuses a FIFO in a log dir at once, naming it, before it writes anything
    (it used to wait for a writer forever, or, for produce, append and then fail)."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    fifo = logctl.root / name
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    before = tree(logctl.root)
    for command in _COMMANDS:
        code, out, err = _run_or_fail_if_blocked(logctl, *command, stdin=RECORD)
        assert code == 1, (command, out, err)
        assert err.count("\n") == 1 and f"{fifo} is a FIFO" in err, (command, err)
        assert tree(logctl.root) == before, command
    if name.startswith("t-0/"):  # the sensors' stats refuse it too (they read no lock or metadata)
        with pytest.raises(NotRegularFileError, match=f"{fifo} is a FIFO"):
            partition_stats(logctl.root)


@pytest.mark.parametrize("name", ["t-0/00000000000000000050.log", "t-0/00000000000000000000.index",
                                  "t-0/.logplat.lock", ".logplat-topics/t.json", "recovery-point-offset-checkpoint",
                                  ".logplat-checkpoints.lock"])
def test_a_directory_where_a_file_belongs_is_named(logctl, name):
    """A directory in place of a segment, an index, a lock, a checkpoint or a topic's metadata is
    refused with its path (reading one failed with a bare "[Errno 21] Is a directory")."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    directory = logctl.root / name
    directory.unlink(missing_ok=True)
    directory.mkdir()
    before = tree(logctl.root)
    for command in _COMMANDS[:-1]:  # topic delete opens no file of a partition: it may remove them
        if command[0] == "retention" and name == "t-0/.logplat.lock":
            continue  # nothing to delete here: retention only sweeps the partition, neither opens nor locks it
        code, out, err = logctl(*command, stdin=RECORD)
        assert code == 1, (command, out, err)
        assert f"{directory} is a directory" in out + err and "Errno" not in out + err, (command, out, err)
        assert tree(logctl.root) == before, command
    if name.startswith("t-0/0"):  # a segment's file: the sensors' stats refuse it too
        with pytest.raises(NotRegularFileError, match=f"{directory} is a directory"):
            partition_stats(logctl.root)


@pytest.mark.parametrize("body", ["[" * 100_000 + "]" * 100_000, '{"name": "t", "partitions": 99999999999}',
                                  '{"name": "t", "partitions": 100000}'])
def test_hostile_metadata_is_a_one_line_error_naming_the_file(logctl, body):
    """Nesting deeper than Python's decoder recurses was a RecursionError traceback; a partition
    count past the largest ``topic create`` can be allowed (``logplat.max.partitions.per.topic``
    at most 99999; a lower setting must not make existing topics unreadable) made verify,
    describe and delete run for ever. ``topic delete`` removes such a topic."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    meta = logctl.root / ".logplat-topics" / "t.json"
    meta.write_text(body)
    before = tree(logctl.root)
    for command in (["verify"], ["topic", "describe", "t"], ["topic", "list"], ["produce", "t", "--partition", "0"]):
        code, out, err = _run_or_fail_if_blocked(logctl, *command, stdin=RECORD)
        assert code == 1 and err.count("\n") == 1 and str(meta) in err and "Traceback" not in err, (command, err)
    assert tree(logctl.root) == before
    assert _run_or_fail_if_blocked(logctl, "topic", "delete", "t")[0] == 0
    assert not meta.exists() and not (logctl.root / "t-0").exists()


@pytest.mark.parametrize("command", [
    ["consume", "u", "--partition", "0"],
    ["produce", "u", "--partition", "0"],
    ["topic", "describe", "u"],
    ["retention", "--topic", "u", "--now-ms", "999999999"],
    ["compact", "--topic", "u", "--dry-run"],
    ["verify", "--topic", "u"],
    ["topic", "delete", "u"],
    ["topic", "create", "w", "--partitions", "1"],
])
def test_another_topics_symlinked_file_fails_only_that_topics_commands(logctl, tmp_path, command):
    """A symlink inside one topic's partition dir is that topic's problem: a command on another
    topic looks only into its own directories (it was refused for every topic of the log dir, and
    the code location, which lists the topics, failed to load; a delete failed past its commit
    point, and every later writable open failed finishing it). A command over every topic is
    still refused before it changes any."""
    for topic in ("t", "u", "v"):
        assert logctl("topic", "create", topic, "--partitions", "1", "--config", "cleanup.policy=compact,delete")[0] == 0
        assert logctl("produce", topic, "--partition", "0", stdin=RECORD)[0] == 0
    victim = tmp_path / "victim.bin"
    victim.write_bytes(b"precious bytes that must survive" * 10)
    link = logctl.root / "t-0" / "00000000000000099999.log"
    link.symlink_to(victim)
    code, out, err = logctl(*command, stdin=RECORD)
    assert code == 0, (out, err)
    assert logctl("produce", "v", "--partition", "0", stdin=RECORD)[0] == 0  # the next writable open
    code, out, err = logctl("retention", "--now-ms", "999999999")
    assert code == 1 and str(link) in err and "symbolic link" in err, (out, err)
    assert victim.read_bytes() == b"precious bytes that must survive" * 10


def test_a_file_named_like_a_partition_is_no_topic(logctl):
    """Only directories (and links, refused where used) make topics: a file ``notes-0`` in the
    log dir was listed as topic ``notes``, which every command then said does not exist."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    (logctl.root / "notes-0").write_text("not a partition\n")
    assert logctl("topic", "list")[1].split() == ["t"]
