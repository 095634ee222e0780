"""Tests of the log layer."""
