"""Tests of `infra.agents`."""
