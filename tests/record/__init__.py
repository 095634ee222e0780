"""Tests of the record layer."""
