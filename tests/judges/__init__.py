"""Tests of `judges`."""
