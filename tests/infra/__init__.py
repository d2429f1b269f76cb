"""Tests of `infra`."""
