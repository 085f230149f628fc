"""The agent protocol, the backends, the tools they offer and the confinement they run under."""
