"""Tests of `infra.deploy`."""
