"""Tests of `flows.report`."""
