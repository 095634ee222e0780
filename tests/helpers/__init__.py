"""Test helpers shared across the suite (import as ``tests.helpers.<module>``)."""
