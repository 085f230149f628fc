"""Stand-ins for modules a library imports at its top but uses only on paths tilth never takes.

detect-secrets imports `requests` (with urllib3, ~4.5 MiB) in every plugin module for `verify`,
which tilth never calls (it would send a found key to its provider). `defer("requests")` puts a
module in `sys.modules` that has the real module's spec and path but has not run its body yet:
`import requests` then binds it for free, and the first attribute anyone reads from it runs the
real body into it, so a later real use (apprise's notifier) sees the whole module.
(`importlib.util.LazyLoader` would load it at the `import` statement itself on Python 3.11: the
import system reads `__spec__` through the module, which LazyLoader counts as a use.)
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any


def defer(name: str, annotation_only: tuple[str, ...] = ()) -> None:
    """Make `name`'s body run on first use rather than on import (nothing when it is imported or absent).
    `annotation_only`: names the importing library reads at import time only to annotate a signature
    (detect-secrets: `-> requests.Response`); each gets a placeholder class of that name, replaced
    by the real one when the body runs, so reading it does not count as a use."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    lock = threading.RLock()

    def __getattr__(attribute: str) -> Any:
        with lock:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                try:
                    spec.loader.exec_module(module)  # type: ignore[union-attr]
                except BaseException:
                    sys.modules.pop(name, None)
                    raise
        return getattr(module, attribute)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    for attribute in annotation_only:
        setattr(module, attribute, type(attribute, (), {"__module__": name}))
    sys.modules[name] = module

