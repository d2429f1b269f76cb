"""Tests of `flows.production`."""
