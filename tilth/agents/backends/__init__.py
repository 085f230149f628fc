"""The agent backends, one module each; `registry.make_backend` picks one by name."""
