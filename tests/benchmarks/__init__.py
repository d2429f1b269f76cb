"""Tests of the benchmark scripts under `benchmarks/` (their machinery, on fakes)."""
