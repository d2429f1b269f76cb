"""Tests of `flows.plumbing`."""
