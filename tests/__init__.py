"""The test suite; its folders mirror the packages (record, log, cleaner, spark, platform)."""
