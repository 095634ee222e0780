"""Tests of the cleaner layer."""
