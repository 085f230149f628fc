"""Read-only views of a session: tallies, status, event lines, following, the end report."""
