"""Kubernetes collectors: the only code that reads a Kubernetes API server.

Importing this package registers the `kubernetes` package without running its `__init__`, which imports
`dynamic` (with jsonschema), `watch`, `stream`, `leaderelection`, `informer` and `utils` eagerly (about 80 ms
on a 2-core machine) while the collectors use only `kubernetes.client` and `kubernetes.config`. A submodule
is imported when it is first named (`from kubernetes import watch`, `kubernetes.watch`); any other name of
the package (`__version__`) runs the real `__init__` in place, so other code sees the whole package as before.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType


def _register_kubernetes_lazily() -> None:
    """Put a not-yet-initialised `kubernetes` package in sys.modules; its real __init__ runs on first need."""
    if "kubernetes" in sys.modules:
        return
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed: the collectors' own import fails with the usual error
    package = importlib.util.module_from_spec(spec)
    initialised = False

    def __getattr__(name: str) -> object:  # PEP 562: the module attribute hook
        nonlocal initialised
        if not name.startswith("_") and importlib.util.find_spec(f"kubernetes.{name}") is not None:
            return importlib.import_module(f"kubernetes.{name}")
        if initialised or name.startswith("__") and name not in ("__version__", "__project__"):
            raise AttributeError(f"module 'kubernetes' has no attribute {name!r}")
        initialised = True
        spec.loader.exec_module(package)
        return ModuleType.__getattribute__(package, name)

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules["kubernetes"] = package


_register_kubernetes_lazily()
