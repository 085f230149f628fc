"""Benchmarks, run by `make bench` (`python -m bench`); each prints a table."""
