"""Tests of `infra.lm.engine`."""
