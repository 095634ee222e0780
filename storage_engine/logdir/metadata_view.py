"""What the topic metadata files of the given log dirs say, read afresh at every question.

Kafka's brokers answer topic questions from the ``MetadataCache`` (the controller's metadata
log); here each topic's metadata is one file (``topic_store``) in one of the log dirs, found by
looking in each. A malformed file is refused where its own topic is used, never for every topic;
a topic whose metadata is in a log dir not given, or gone while a placement mark still names a
given log dir as its home (an orphan), is refused naming what is left of it. Composed into the
log manager as ``manager.metadata``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager

from ..config.topic import INTERNAL_TOPIC_DEFAULTS
from ..errors import LogError, UnknownTopicOrPartitionError
from .locations import dir_list, partition_dirs
from .log_dir import LogDir
from .topic_store import (
    TopicMetadata,
    TopicMetadataError,
    metadata_lock,
    metadata_names,
    metadata_read_lock,
    placed_elsewhere,
    placed_names,
    placed_path,
    read_metadata,
)


class MetadataView:
    """The topics' metadata over ``log_dirs``: found, listed, counted, and the overrides it holds."""

    def __init__(self, log_dirs: Sequence[LogDir]) -> None:
        self.log_dirs = log_dirs

    def partition_counts(self) -> dict[str, int]:
        """Each topic's partition count, from its metadata (topics without metadata, or being
        deleted, have none: their partitions are the directories found). An orphan
        (``orphans``) counts none, so every directory of it is a stray: never opened."""
        return {**dict.fromkeys(self.orphans(), 0),
                **{name: meta.partitions for name, (_, meta) in self.readable().items()}}

    def _files(self) -> Iterator[tuple[LogDir, str, TopicMetadata | LogError]]:
        """Every metadata file of the log dirs, read: its log dir, its topic, and its metadata or
        why it is refused."""
        for d in self.log_dirs:
            for name in metadata_names(d.path):
                try:
                    meta = read_metadata(d.path, name)
                except LogError as exc:
                    yield d, name, exc
                    continue
                if meta is not None:
                    yield d, name, meta

    def readable(self) -> dict[str, tuple[LogDir, TopicMetadata]]:
        """Every topic's metadata and the log dir holding it, but for topics being deleted. A
        malformed metadata file is left out here (``unreadable``): it is refused where
        its own topic is used, not for every topic."""
        out: dict[str, tuple[LogDir, TopicMetadata]] = {}
        for d, name, meta in self._files():
            if isinstance(meta, TopicMetadata) and not meta.deleting:
                out.setdefault(name, (d, meta))
        return out

    def unreadable(self) -> dict[str, str]:
        """The topics whose metadata file is refused, each with why (naming the file). Commands
        over every topic pass them over and name them; a command naming one is refused, and
        ``topic delete`` removes it."""
        out: dict[str, str] = {}
        for _, name, meta in self._files():
            if isinstance(meta, LogError):
                out.setdefault(name, str(meta))
        return out

    def orphans(self) -> dict[str, str]:
        """Topics left as a placement mark (``topic_store.mark_placed``), with any partition
        directories beside it, whose metadata is in none of the log dirs given although the log
        dir the mark names as its home is given: what a delete not given every log dir the topic
        was placed over leaves. No command reads an orphan; ``verify`` names it and ``topic
        delete`` removes it. Returns each orphan's home log dir."""
        given = {str(d.path) for d in self.log_dirs}
        with_metadata = {name for d in self.log_dirs for name in metadata_names(d.path)}
        out: dict[str, str] = {}
        for d in self.log_dirs:
            for name in sorted(placed_names(d.path) - with_metadata):
                try:
                    home = placed_elsewhere(d.path, name)
                except LogError:  # a mark that is no file: refused where its topic is used
                    continue
                if home in given:
                    out.setdefault(name, home)
        return out

    def orphan_error(self, topic: str, home: str) -> UnknownTopicOrPartitionError:
        """The refusal of an orphan (``orphans``) wherever it is named, naming what is left of it."""
        left = [*(str(loc.path) for _, loc in sorted(partition_dirs(self.log_dirs, topic).items())),
                *(str(placed_path(d.path, topic)) for d in self.log_dirs if topic in placed_names(d.path))]
        return UnknownTopicOrPartitionError(
            f"Topic {topic} does not exist: its metadata is gone from log dir {home}, yet {', '.join(left)} "
            f"{'is' if len(left) == 1 else 'are'} left of it (an orphan, which no command reads: a topic delete not "
            f"given every log dir leaves one); remove it with `logctl topic delete {topic}`")

    def find(self, topic: str) -> tuple[LogDir, TopicMetadata] | None:
        """The log dir holding the topic's metadata file and its (validated) content."""
        for d in self.log_dirs:
            meta = read_metadata(d.path, topic)
            if meta is not None:
                return d, meta
        return None

    def topic(self, topic: str) -> TopicMetadata | None:
        """The topic's metadata; None when it has none or is being deleted."""
        found = self.find(topic)
        return found[1] if found is not None and not found[1].deleting else None

    def lock(self) -> AbstractContextManager[None]:
        """The topics lock (``topic_store.metadata_lock``), under which every topic change runs."""
        return metadata_lock([d.path for d in self.log_dirs])

    def read_lock(self) -> AbstractContextManager[None]:
        """For a reader listing topics and their partition directories together: no topic
        change is half made while it lists (``topic_store.metadata_read_lock``)."""
        return metadata_read_lock([d.path for d in self.log_dirs])

    def being_deleted(self) -> set[str]:
        """Topics past a delete's commit point that a kill left for the next writable open to
        finish: no longer topics to any reader (a malformed metadata file is left out here)."""
        return {name for _, name, meta in self._files() if isinstance(meta, TopicMetadata) and meta.deleting}

    def hidden(self) -> set[str]:
        """Topics no command lists: those whose metadata file is refused (``unreadable``) or
        marks a delete a kill interrupted (``being_deleted``), read in one pass."""
        return {name for _, name, meta in self._files() if isinstance(meta, LogError) or meta.deleting}

    def overrides(self, topic: str) -> dict[str, str]:
        """The topic's config overrides from its metadata. A topic without metadata (a broker's
        log dir copied in) has none, bar an internal topic's; one whose metadata is in a log
        dir not given here is refused: its partitions were placed from there. A topic whose
        deletion a kill interrupted keeps its config until its files are gone: recovery loads its
        partitions before the open finishes the delete."""
        found = self.find(topic)
        if found is not None:
            return dict(found[1].configs)
        for d in self.log_dirs:
            home = placed_elsewhere(d.path, topic)
            if home is not None and home in {str(given.path) for given in self.log_dirs}:
                raise self.orphan_error(topic, home)
            if home is not None:
                raise TopicMetadataError(
                    f"the metadata of topic {topic} is in log dir {home}, which is not among the log dirs given "
                    f"({dir_list(self.log_dirs)}): {d.path} holds partitions of it placed from there, which the broker "
                    f"defaults would misjudge; give every log dir (if the topic was deleted without {d.path}, "
                    f"remove its partition directories there and {placed_path(d.path, topic)})")
        return dict(INTERNAL_TOPIC_DEFAULTS.get(topic, {}))  # a broker's internal topic copied without its metadata
