"""Tests of `flows`."""
