"""The two sparse indexes of one segment, kept in step: Kafka's ``LogSegment`` holds its
``OffsetIndex`` and ``TimeIndex`` side by side and changes them together (an entry in one
has its twin in the other, a truncation or a resize touches both). ``SegmentIndexes`` is
that pair, so ``LogSegment`` states each such step once; the offset index always goes first,
as Kafka's does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..files.naming import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_file
from ..index import IndexMark, OffsetIndex, TimeIndex


@dataclass(frozen=True)
class SegmentIndexes:
    """A segment's ``.index`` and ``.timeindex``; see the module docstring."""

    offset_index: OffsetIndex
    time_index: TimeIndex

    @classmethod
    def open(cls, directory: Path, base_offset: int, file_suffix: str, max_index_size: int,
             *, writable: bool) -> SegmentIndexes:
        """The segment's indexes by their file names (opened lazily by the index classes)."""
        return cls(
            OffsetIndex(segment_file(directory, base_offset, INDEX_SUFFIX + file_suffix), base_offset,
                        max_index_size, writable=writable),
            TimeIndex(segment_file(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix), base_offset,
                      max_index_size, writable=writable),
        )

    @property
    def both(self) -> tuple[OffsetIndex, TimeIndex]:
        return self.offset_index, self.time_index

    def have_room(self) -> bool:
        """Whether both indexes take another entry. A producer's segment rolls before it fills
        them (``LogSegment.should_roll``); a cleaned segment (one per group, which cannot roll)
        and a recovery's rebuild, under a ``segment.index.bytes`` lowered since the data was
        written, then index no further: a sparser index is still a correct one, where a full one
        failed every compaction and recovery of the log ("Attempt to append to a full index")."""
        return not (self.offset_index.is_full or self.time_index.is_full)

    def add_entry(self, offset: int, position: int, max_timestamp: int, offset_of_max_timestamp: int) -> bool:
        """One entry in each index (the batch ending at ``offset`` starts at ``position``; the
        largest timestamp so far), when both have room (``have_room``); returns whether it was
        added."""
        if not self.have_room():
            return False
        self.offset_index.append(offset, position)
        self.time_index.maybe_append(max_timestamp, offset_of_max_timestamp)
        return True

    def create_files(self) -> None:
        for index in self.both:
            index.create_file()

    def mark(self) -> tuple[IndexMark, IndexMark]:
        return self.offset_index.mark(), self.time_index.mark()

    def rollback(self, offset_mark: IndexMark, time_mark: IndexMark) -> None:
        self.offset_index.rollback(offset_mark)
        self.time_index.rollback(time_mark)

    def reset(self) -> None:
        for index in self.both:
            index.reset()

    def truncate_to(self, offset: int) -> None:
        for index in self.both:
            index.truncate_to(offset)

    def resize(self, size: int) -> None:
        for index in self.both:
            index.resize(size)

    def trim_to_valid_size(self) -> None:
        for index in self.both:
            index.trim_to_valid_size()

    def forget(self) -> None:
        for index in self.both:
            index.forget()

    def flush(self) -> None:
        for index in self.both:
            index.flush()

    def close(self) -> None:
        """Trimmed to their entries (which creates a file never used), then closed."""
        self.trim_to_valid_size()
        for index in self.both:
            index.close()

    def release(self) -> None:
        """Closed untouched: another process may have appended since (``AbstractIndex.release``)."""
        for index in self.both:
            index.release()

    def rename(self, directory: Path, base_offset: int, file_suffix: str) -> None:
        """Follow files already renamed to ``file_suffix`` (``LogSegment.change_file_suffix``)."""
        self.offset_index.rename_to(segment_file(directory, base_offset, INDEX_SUFFIX + file_suffix))
        self.time_index.rename_to(segment_file(directory, base_offset, TIME_INDEX_SUFFIX + file_suffix))
