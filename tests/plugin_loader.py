"""Load the repository root (the plugin directory) as the package ``tencentdb_offload``, the
way Hermes loads a user plugin. Without pytest: the benchmarks load the plugin this way too,
from Pythons that have no pytest (the tokenizer venv, a fresh machine's ``python3``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_plugin(name: str = "tencentdb_offload"):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
