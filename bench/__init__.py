"""Benchmarks of bemore against baselines measured in the same run (see bench/README.md)."""
