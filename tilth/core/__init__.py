"""The foundation: errors, clock, settings, fault points. Imports nothing else of tilth."""
