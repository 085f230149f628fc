"""tilth: turn a task list into a reviewable git branch, one commit per task."""

from tilth.core import VERSION as __version__

__all__ = ["__version__"]
