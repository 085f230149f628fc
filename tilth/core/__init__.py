"""The foundation: errors, clock, settings, fault points, the version. Imports nothing else of tilth."""

VERSION = "0.1.0"
"""The package version (pyproject.toml reads it from here)."""
