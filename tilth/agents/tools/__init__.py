"""Tools a model-driven worker or evaluator calls inside its worktree.

`fs.Workspace` reads, writes, edits, lists and searches files confined to one worktree;
`shell.run_bash` runs a command there with a timeout. Both return text for the model and
raise `core.errors.ToolError` with a message meant to be shown to the model when a call is refused.
"""
