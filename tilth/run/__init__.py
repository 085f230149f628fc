"""The session loop and what it calls in order."""
