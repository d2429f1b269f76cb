"""Tests of `gepa_opt`."""
