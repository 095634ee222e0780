"""Topic metadata files: ``<log dir>/.logplat-topics/<topic>.json``, and the lock that serialises changes.

Kafka keeps topic metadata in the controller's log, so creates, alters and deletes are ordered
by one writer. Here any process may run ``topic create/alter/delete``: every change takes an
exclusive ``flock`` on ``.logplat-topics.lock`` in each log dir (in path order, so two processes
never deadlock) around its read-modify-write. A metadata file is read as strictly as command
line input: its ``name`` must be the file's own (validated) topic name, so a hand-edited file
cannot point a write anywhere else.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config.broker import MAX_PARTITIONS_CEILING, MAX_PARTITIONS_KEY
from ..errors import LogError
from ..files.durable import TMP_SUFFIX, atomic_write, fsync_dir
from ..files.naming import MAX_TOPIC_LENGTH, validate_topic_name
from ..files.nofollow import check_dir_or_missing, check_file_entry, check_under, open_nofollow, read_bytes_nofollow
from ..files.strict_json import DuplicateFieldError, unique_fields
from .dir_id import is_dir_id

TOPICS_DIR = ".logplat-topics"
METADATA_LOCK = ".logplat-topics.lock"
_SUFFIX = ".json"
#: the most log dirs a metadata file may say a topic was placed over (a sanity bound on data read off disk)
MAX_LOG_DIRS = 10_000
_PLACED_SUFFIX = ".home"  # as long as ".json": a 249-character topic fits NAME_MAX
_MAX_PATH = 4096  # PATH_MAX: a log dir's path as ``placed_over`` recorded it


class TopicMetadataError(LogError):
    """A topic metadata file on disk is malformed, names another topic, or holds a config the
    engine refuses."""


class TopicConfigError(TopicMetadataError):
    """A topic's stored config (its metadata file's ``configs``) is one the engine refuses."""

    def __init__(self, topic: str, path: Path, reason: Exception) -> None:
        super().__init__(f"the config of topic {topic} in {path} is refused: {reason}; correct it with `logctl topic "
                         f"alter {topic}` (--config, --delete-config), or in the file")


@dataclass(frozen=True)
class TopicMetadata:
    """One topic's partition count and config overrides. ``deleting`` marks the commit point of
    ``topic delete``: the next writable open finishes a delete a crash interrupted.
    ``placed_over`` names the log dirs its partitions may be in, by id (``dir_id``), each with the
    path it had then (for messages only): a writable command not given all of them never makes a
    partition's missing directory, which may be in one not given (an empty copy of it there hid
    its records, then wedged every later command on "Duplicate log directories"). ``log_dirs``
    counts them: the only record in metadata written before the ids, and still written beside
    them for that version, which reads only the count (0: neither)."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)  # topic-level overrides, as given
    topic_id: str = ""
    deleting: bool = False
    log_dirs: int = 0
    placed_over: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        body = {"version": 0, "name": self.name, "partitions": self.partitions, "configs": self.configs,
                "topic_id": self.topic_id}
        if self.deleting:
            body["deleting"] = True
        if self.log_dirs:
            body["log_dirs"] = self.log_dirs
        if self.placed_over:
            body["placed_over"] = self.placed_over
        return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()

    def placed_also_over(self, log_dirs: dict[str, str]) -> TopicMetadata:
        """This metadata with ``log_dirs`` (ids and paths) among those it was placed over."""
        merged = {**self.placed_over, **log_dirs}
        return replace(self, placed_over=merged, log_dirs=max(self.log_dirs, len(merged)))


def shown_path(path: str) -> str:
    """A log dir's path as ``placed_over`` recorded it, fit for a one-line message: any path the
    system takes is recorded, so one with a newline, a tab or a byte that is not UTF-8 is quoted."""
    return path if path.isprintable() else ascii(path)


def metadata_path(log_dir: Path, topic: str) -> Path:
    validate_topic_name(topic)
    return Path(log_dir) / TOPICS_DIR / f"{topic}{_SUFFIX}"


def parse_metadata(data: bytes, path: Path, topic: str) -> TopicMetadata:
    """Decode and validate a metadata file; every field is checked as CLI input would be, the
    partition count against the largest ``topic create`` can ever allow (a count of 99999999999
    made every command that lists a topic's partitions run for ever; the configured limit is not
    used, so lowering it never makes an existing topic unreadable)."""
    try:
        body = json.loads(data.decode("utf-8"), object_pairs_hook=unique_fields)
    except DuplicateFieldError as exc:  # the last one would win silently: which did the writer mean?
        raise TopicMetadataError(f"topic metadata file {path} is invalid: {exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise TopicMetadataError(f"topic metadata file {path} is not JSON: {exc}") from None
    except RecursionError:  # Python's decoder recurses once per nested array or object
        raise TopicMetadataError(f"topic metadata file {path} is invalid: its JSON is nested too deeply") from None

    def bad(why: str) -> TopicMetadataError:
        return TopicMetadataError(f"topic metadata file {path} is invalid: {why}")

    if not isinstance(body, dict):
        raise bad("expected a JSON object")
    name = body.get("name")
    if name != topic:
        raise bad(f"its name {name!r} is not the topic {topic!r} its file name says")
    partitions = body.get("partitions")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or not 1 <= partitions <= MAX_PARTITIONS_CEILING:
        raise bad(f"partitions must be an integer from 1 to {MAX_PARTITIONS_CEILING} (the most {MAX_PARTITIONS_KEY} "
                  f"allows), got {partitions!r}")
    configs = body.get("configs", {})
    if not isinstance(configs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
        raise bad(f"configs must map strings to strings, got {configs!r}")
    topic_id = body.get("topic_id", "")
    deleting = body.get("deleting", False)
    if not isinstance(topic_id, str) or not isinstance(deleting, bool):
        raise bad("topic_id must be a string and deleting a boolean")
    log_dirs = body.get("log_dirs", 0)
    if isinstance(log_dirs, bool) or not isinstance(log_dirs, int) or not 0 <= log_dirs <= MAX_LOG_DIRS:
        raise bad(f"log_dirs must be an integer from 0 to {MAX_LOG_DIRS}, got {log_dirs!r}")
    placed_over = body.get("placed_over", {})
    if not (isinstance(placed_over, dict) and len(placed_over) <= MAX_LOG_DIRS
            and all(is_dir_id(k) and isinstance(v, str) and 0 < len(v) <= _MAX_PATH for k, v in placed_over.items())):
        raise bad(f"placed_over must map at most {MAX_LOG_DIRS} log dir ids to their paths, got {placed_over!r:.200}")
    return TopicMetadata(topic, partitions, dict(configs), topic_id, deleting, log_dirs, dict(placed_over))


def read_metadata(log_dir: Path, topic: str) -> TopicMetadata | None:
    """The topic's metadata in this log dir, or None; symlinks are refused, not followed."""
    path = metadata_path(log_dir, topic)
    check_dir_or_missing(path.parent)
    try:
        data = read_bytes_nofollow(path)
    except FileNotFoundError:
        return None
    return parse_metadata(data, path, topic)


def metadata_names(log_dir: Path, suffix: str = _SUFFIX) -> list[str]:
    """Topic names with a metadata file here (or, with ``suffix``, another file of the folder:
    a placement mark); files whose stem is not a legal topic are ignored."""
    directory = Path(log_dir) / TOPICS_DIR
    check_dir_or_missing(directory)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        stem = name[: -len(suffix)] if name.endswith(suffix) else ""
        if stem and len(stem) <= MAX_TOPIC_LENGTH:
            try:
                validate_topic_name(stem)
            except LogError:
                continue
            out.append(stem)
    return out


def placed_names(log_dir: Path) -> set[str]:
    """Topics with a placement mark here (``mark_placed``), in one listing of the folder."""
    return set(metadata_names(log_dir, _PLACED_SUFFIX))


def write_metadata(meta: TopicMetadata, log_dir: Path) -> None:
    """Atomically replace the topic's file; the caller holds :func:`metadata_lock`.

    The temporary name is short and unique, not ``<topic>.json.tmp``, which passes NAME_MAX
    (255) for a 249-character topic. Under the lock no other write is in flight, so any
    temporary file found is a killed writer's and is removed.
    """
    path = metadata_path(log_dir, meta.name)
    check_dir_or_missing(path.parent)
    path.parent.mkdir(exist_ok=True)
    check_under(path.parent, log_dir)
    stale = [entry for entry in os.scandir(path.parent) if entry.name.endswith(TMP_SUFFIX)]
    for entry in stale:  # every one checked before the first is removed; a symlink goes, unfollowed
        if not entry.is_symlink():
            check_file_entry(entry)
    for entry in stale:
        os.unlink(entry.path)
    atomic_write(path, meta.to_json(), tmp=path.with_name(f".{uuid.uuid4().hex}{TMP_SUFFIX}"))


def remove_metadata(log_dir: Path, topic: str) -> None:
    _remove(metadata_path(log_dir, topic))


def _remove(path: Path) -> None:
    """Remove a file of the metadata folder, durably; one already gone is no error."""
    check_dir_or_missing(path.parent)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    fsync_dir(path.parent)


def placed_path(log_dir: Path, topic: str) -> Path:
    validate_topic_name(topic)
    return Path(log_dir) / TOPICS_DIR / f"{topic}{_PLACED_SUFFIX}"


def mark_placed(log_dir: Path, topic: str, home: Path) -> None:
    """Record in ``log_dir`` that partitions of ``topic`` are placed here while its metadata is
    in the log dir ``home`` (the file holds that path, for the error that names it). A command
    given this log dir without ``home`` then refuses the topic (``placed_elsewhere``) instead
    of reading it as one without metadata, under the broker defaults: retention deleted the
    latest values of a compacted topic so. Written before the partition's directory is made;
    the caller holds :func:`metadata_lock`."""
    path = placed_path(log_dir, topic)
    check_dir_or_missing(path.parent)
    path.parent.mkdir(exist_ok=True)
    check_under(path.parent, log_dir)
    atomic_write(path, os.fsencode(home), tmp=path.with_name(f".{uuid.uuid4().hex}{TMP_SUFFIX}"))


def placed_elsewhere(log_dir: Path, topic: str) -> str | None:
    """The log dir holding the metadata of ``topic``, whose partitions ``mark_placed`` recorded
    here; None when there is no such record."""
    path = placed_path(log_dir, topic)
    check_dir_or_missing(path.parent)
    try:
        return shown_path(os.fsdecode(read_bytes_nofollow(path)))  # any path the system takes, as written
    except FileNotFoundError:
        return None


def remove_placed(log_dir: Path, topic: str) -> None:
    _remove(placed_path(log_dir, topic))


#: how long a reader waits for a topic change in flight (``metadata_read_lock``)
READ_LOCK_WAIT_S = 30.0


@contextmanager
def metadata_read_lock(log_dirs: Sequence[Path], wait_s: float = READ_LOCK_WAIT_S) -> Iterator[None]:
    """Shared ``flock`` on every log dir's ``.logplat-topics.lock`` (path order), for a reader
    that lists topics against their partition directories (``verify``): it sees them between
    two changes, never a create, an alter of the partition count or a delete half made, which
    it reported as missing directories and strays. A log dir without the file has seen no
    change. Hold it only while listing, and never block on it: a first writer can hold the
    recovery gate while it waits for this lock (to finish a pending delete), and a reader that
    held the lock while it waited at the gate would wait for ever. So the wait is polled, at
    most ``wait_s`` per log dir, and past it the listing goes on without the lock."""
    with ExitStack() as stack:
        for d in sorted(Path(p) for p in log_dirs):
            try:
                fd = open_nofollow(d / METADATA_LOCK, os.O_RDONLY)
            except (FileNotFoundError, PermissionError):  # no change seen there, or a reader that may not lock
                continue
            stack.callback(os.close, fd)
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.005)
        yield


@contextmanager
def metadata_lock(log_dirs: Sequence[Path]) -> Iterator[None]:
    """Exclusive ``flock`` on every log dir's ``.logplat-topics.lock``, taken in path order."""
    with ExitStack() as stack:
        for d in sorted(Path(p) for p in log_dirs):
            d.mkdir(parents=True, exist_ok=True)
            fd = open_nofollow(d / METADATA_LOCK, os.O_RDWR | os.O_CREAT)
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
