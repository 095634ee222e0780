"""What people read in the UI: sizes, durations and Kafka's no-limit config values."""

from __future__ import annotations

from platform_assets.logic.catalog import config_text
from platform_assets.logic.units import binary_size_text, duration_text, size_text


def test_sizes_and_durations_read_in_their_unit():
    assert [size_text(n) for n in (912, 3_400, 56_200_000, 1_073_741_824, 250_000_000_000)] == \
        ["912 B", "3.4 KB", "56.2 MB", "1.07 GB", "250 GB"]
    assert [duration_text(s) for s in (45, 720, 10_800, 604_800)] == ["45 s", "12 min", "3 h", "7 d"]
    assert [binary_size_text(n) for n in (100, 4096, 1_572_864, 1_073_741_824, 1_000_000_000)] == \
        ["100 B", "4 KiB", "1.5 MiB", "1 GiB", "953.7 MiB"]


def test_kafka_no_limit_values_read_as_unlimited():
    assert config_text("retention.bytes", -1) == "unlimited"
    assert config_text("max.compaction.lag.ms", 9223372036854775807) == "unlimited"
    assert config_text("retention.ms", 604_800_000) == "604800000 (7 d)"
    assert config_text("segment.bytes", 1_073_741_824) == "1073741824 (1 GiB)"
    assert config_text("min.cleanable.dirty.ratio", 0.5) == "0.5"
    assert config_text("cleanup.policy", ("compact", "delete")) == "compact,delete"
