"""Tests of `infra.lm`."""
