"""File and directory names of a Kafka log directory.

Kafka finds everything by name: a partition is the directory ``<topic>-<partition>``, a segment
is the set of files ``<20-digit base offset><suffix>``, and the cleaner and retention mark files
in flight with an extra suffix (``.cleaned``, ``.swap``, ``.deleted``). A directory copied from
a broker only loads if these rules are followed to the character, so they live here once
(Kafka's ``LogFileUtils`` and ``Topic`` rules).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import InvalidSegmentNameError, InvalidTopicError
from ..limits import INT_MAX, LONG_MAX
from .nofollow import check_dir_entry, check_file_entry

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"

#: The local copy of a tiered partition's latest remote version (``remote.local_state``).
REMOTE_LOG_METADATA_FILE = "remote-log-metadata.json"

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

#: Suffixes Kafka gives partition directories that are not live partitions (``LocalLog``):
#: a topic being deleted, the target of a log-dir move, and a stray left behind by KRaft.
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

MAX_TOPIC_LENGTH = 249
MAX_PARTITION = INT_MAX
OFFSET_DIGITS = 20

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_DIGITS = re.compile(r"[0-9]+")


def validate_topic_name(name: str) -> None:
    """Reject a topic name Kafka would reject, naming the name and the rule it breaks.

    The character set keeps names safe as directory names and in the space-separated
    checkpoint files; the length limit leaves room for ``-<partition>`` and the
    ``.<uuid>-delete`` suffix inside a 255-byte file name.
    """
    if not isinstance(name, str) or name == "":
        raise InvalidTopicError(f"Topic name {name!r} is illegal: it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name {name!r} is illegal: it can't be '.' or '..'")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal: it can't be longer than {MAX_TOPIC_LENGTH} "
            f"characters (it has {len(name)})"
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal: it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


#: KRaft's metadata log: in a broker's log dir copied here it reads like a topic, but it is the
#: cluster's metadata, which Kafka trims only below its latest snapshot (``.checkpoint``) and
#: never lets a client create, produce to or configure. The engine reads it and changes nothing.
METADATA_LOG_TOPIC = "__cluster_metadata"


def check_not_metadata_log(topic: str, what: str) -> None:
    """Refuse ``what`` (a topic change, a produce) on KRaft's metadata log."""
    if topic == METADATA_LOG_TOPIC:
        raise InvalidTopicError(f"{what} refused: {topic} is KRaft's metadata log, not a topic; it is read here, "
                                "never changed")


def collides(name: str, other: str) -> bool:
    """Kafka's ``Topic.hasCollision``: names equal once '.' reads as '_' (metric names mix them)."""
    return name != other and name.replace(".", "_") == other.replace(".", "_")


def _validate_partition(topic: str, partition: int) -> None:
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidTopicError(f"Partition {partition!r} of topic {topic!r} is not an integer")
    if partition < 0 or partition > MAX_PARTITION:
        raise InvalidTopicError(
            f"Partition {partition} of topic {topic!r} is out of range: must be 0..{MAX_PARTITION}"
        )


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, after checking both parts."""
    validate_topic_name(topic)
    _validate_partition(topic, partition)
    return f"{topic}-{partition}"


NAME_MAX = 255


def delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """``<topic>-<partition>.<unique id>-delete``, the name Kafka's ``LocalLog`` gives a partition
    directory being deleted; the topic is cut short, as Kafka does, so the name fits NAME_MAX."""
    suffix = f"-{partition}.{unique_id}{DELETE_DIR_SUFFIX}"
    return topic[: NAME_MAX - len(suffix)] + suffix


_DELETE_DIR = re.compile(r"[a-zA-Z0-9._-]+-[0-9]+\.[0-9a-f]{32}" + re.escape(DELETE_DIR_SUFFIX))


def is_delete_dir_name(name: str) -> bool:
    """True for a name :func:`delete_dir_name` gives (with a UUID's 32 hex digits as the unique
    id, as Kafka's ``LocalLog`` does): only such directories are removed at a writable open.
    Kafka's ``DeleteDirPattern`` takes any ``<a>-<b>.<c>-delete``; here a user's own directory
    (``reports-delete``) next to the partitions is never taken for one and removed."""
    return _DELETE_DIR.fullmatch(name) is not None


def is_digits(text: str) -> bool:
    """ASCII digits only. ``str.isdigit`` also takes other scripts' digits (``"٣"``), which
    ``int`` parses, so a name or key that is not Kafka's would be taken for a number."""
    return _DIGITS.fullmatch(text) is not None


def parse_partition_number(text: str) -> int | None:
    """The partition ``text`` spells as Kafka writes one (``<topic>-<n>``): ASCII digits, no
    leading zero, at most ``Int.MaxValue``; else ``None``. Directory names, partition keys and
    the data source's offsets all read partition numbers by this one rule."""
    if not is_digits(text) or (len(text) > 1 and text[0] == "0"):
        return None
    number = int(text)
    return number if number <= MAX_PARTITION else None


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` for a live partition directory name, else ``None``.

    The split is at the last ``-`` because topics may contain ``-``. Directories being deleted,
    moved or left stray, and anything whose parts do not round-trip through
    ``partition_dir_name`` (``foo-01``, ``bad topic-0``), are not partitions to load.
    """
    if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    topic, sep, number = name.rpartition("-")
    partition = parse_partition_number(number) if sep else None
    if partition is None:
        return None
    try:
        validate_topic_name(topic)
    except InvalidTopicError:
        return None
    return topic, partition


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded decimal Kafka uses as a segment's file name stem."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"segment base offset must be a non-negative integer, got {offset!r}")
    return f"{offset:0{OFFSET_DIGITS}d}"


def segment_file(dir: Path, base_offset: int, suffix: str) -> Path:
    """Path of one file of the segment at ``base_offset``; ``suffix`` may be compound (``.log.swap``)."""
    return Path(dir) / (filename_prefix_from_offset(base_offset) + suffix)


def offset_from_file_name(name: str, directory: Path | None = None) -> int:
    """The base offset encoded before the first ``.`` of a segment file name.

    Kafka's ``LogFileUtils.offsetFromFileName`` parses it as a Long, so a load fails on a
    larger number; so does this (``InvalidSegmentNameError``, naming the file, in
    ``directory`` when given), before the offset reaches a file format that has 64 bits for it.
    """
    dot = name.find(".")
    stem = name[:dot] if dot >= 0 else ""
    if not _DIGITS.fullmatch(stem):
        raise ValueError(f"file name {name!r} does not start with a numeric offset followed by '.'")
    offset = int(stem)
    if offset > LONG_MAX:
        where = Path(directory) / name if directory is not None else name
        raise InvalidSegmentNameError(
            f"{where}: the offset in the file name is above {LONG_MAX}, the largest offset Kafka allows; "
            f"move the file out of the partition directory"
        )
    return offset


_SEGMENT_FILE_KINDS = {s.lstrip(".") for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
                                                SNAPSHOT_SUFFIX)}


_LONG_MAX_DIGITS = f"{LONG_MAX:0{OFFSET_DIGITS}d}"


def is_segment_file(name: str) -> bool:
    """True for a file of a segment: its base offset as exactly 20 digits, then ``.`` and a suffix.

    ``LogFileUtils.filenamePrefixFromOffset`` writes 20 digits and every path is rebuilt from
    the offset, so ``5.log`` is not the file of segment 5 (``00000000000000000005.log``).
    """
    return name[OFFSET_DIGITS : OFFSET_DIGITS + 1] == "." and _DIGITS.fullmatch(name, 0, OFFSET_DIGITS) is not None


def is_misnamed_segment_file(name: str) -> bool:
    """True for a name like a segment file's with a base offset of other than 20 digits
    (``5.log``, ``000000000000000000005.index.deleted``): Kafka would parse the offset and then
    open the 20-digit name, a file that does not exist."""
    stem, dot, rest = name.partition(".")
    return (bool(dot) and len(stem) != OFFSET_DIGITS and _DIGITS.fullmatch(stem) is not None
            and rest.split(".")[0] in _SEGMENT_FILE_KINDS)


def check_segment_file_name(directory: Path, name: str) -> bool:
    """Whether ``name`` (in ``directory``) is a segment's file, after refusing a name like a
    segment file's that is not one (``InvalidSegmentNameError``, naming the file): a base offset
    of other than 20 digits (``5.log``: ignoring it would drop its records unseen, and reading
    it as segment 5 looked for ``00000000000000000005.log``), or one above Long.MAX_VALUE
    (Kafka's ``offsetFromFileName`` parses a Long, and the load fails)."""
    if is_segment_file(name):
        if name[:OFFSET_DIGITS] > _LONG_MAX_DIGITS:  # equal widths: the strings compare as the numbers
            offset_from_file_name(name, directory)  # raises, naming the file
        return True
    if is_misnamed_segment_file(name):
        raise InvalidSegmentNameError(f"{Path(directory) / name}: not a segment file name: a segment's files are "
                                      f"named by its base offset in exactly 20 digits; rename or move the file")
    return False


def check_partition_entry(directory: Path, entry: os.DirEntry) -> bool:
    """Whether one entry of a partition directory is a segment's file, after refusing what no
    partition dir may hold, naming it: a symlink, a FIFO, socket or device, a misnamed segment
    file (:func:`check_segment_file_name`), or a segment file that is not a regular file. The
    loader and the partition stats both hold every entry to this one rule. An entry gone since
    the listing is not a segment's file: stats read without the partition lock while writers
    rename and remove files, and nobody sweeps ``.deleted`` files under the lock
    (``retention.sweep_deleted_files``)."""
    check_dir_entry(entry)
    if not check_segment_file_name(directory, entry.name):
        return False
    try:
        check_file_entry(entry)
    except FileNotFoundError:
        return False
    return True
