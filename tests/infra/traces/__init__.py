"""Tests of `infra.traces`."""
