"""Tests of `flows.night`."""
