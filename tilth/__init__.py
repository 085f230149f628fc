"""tilth: turn a task list into a reviewable git branch, one commit per task."""

__version__ = "0.1.0"
