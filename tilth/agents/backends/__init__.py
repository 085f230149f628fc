"""The agent backends, one module each; `agents.protocol.make_backend` picks one by name."""
