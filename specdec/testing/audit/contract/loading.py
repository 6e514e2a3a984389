"""Loading the function an audit names: ``MODULE:FUNCTION`` or ``path.py:FUNCTION``.

One loader for the command (``specdec audit FILE:NAME``, ``--target``, ``--reference``, ...)
and for worker processes that import the audited function by name (``shard``), so the same
spec resolves to the same function everywhere.
"""

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["load_attribute", "load_function"]


def load_function(spec: str) -> Callable[..., Any]:
    """Resolve ``MODULE:FUNCTION`` (a dotted module or a ``.py`` path; nested attributes ok).

    A ``.py`` path is imported with its folder first on ``sys.path``, as ``python path.py``
    would run it, so a module beside it imports.
    """
    target = load_attribute(spec)
    if not callable(target):
        raise ValueError(f"{spec} is not callable.")
    return target  # type: ignore[no-any-return]


def load_attribute(spec: str) -> Any:
    """Resolve ``MODULE:NAME`` as ``load_function`` does, callable or not (a model object)."""
    if ":" not in spec:
        raise ValueError(f"expected MODULE:FUNCTION, got {spec!r}.")
    module_name, _, attribute = spec.rpartition(":")
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.exists():
            raise ValueError(f"no such file: {module_name}.")
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import {module_name}.")
        folder = str(path.resolve().parent)  # a module beside the file imports, as under python
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        sys.path.insert(0, str(Path.cwd()))
        module = importlib.import_module(module_name)
    target: Any = module
    for part in attribute.split("."):
        target = getattr(target, part)
    return target
