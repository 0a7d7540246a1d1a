"""``python3 <plugin dir> <command>``: the tencentdb-offload command line.

Python puts the directory it runs first on ``sys.path``, which would make the plugin's
modules (``session``, ``engine``, ``settings`` …) importable as top-level names for every
library in the process. So the plugin directory leaves ``sys.path`` before anything else is
imported, and the directory is loaded as a package (the way Hermes loads a user plugin), so
relative imports work from a clone, from ``$HERMES_HOME/plugins/tencentdb-offload`` and
without Hermes installed.
"""

import os
import sys

_ROOT = os.path.dirname(os.path.realpath(os.path.abspath(__file__)))


def _same(entry: str) -> bool:
    try:
        return os.path.realpath(os.path.abspath(entry or os.curdir)) == _ROOT
    except (OSError, ValueError):
        return False


sys.path[:] = [p for p in sys.path if not _same(p)]

import importlib.util  # noqa: E402  (after the sys.path fix, on purpose)

PACKAGE = "tencentdb_offload"


def _load_plugin():
    existing = sys.modules.get(PACKAGE)
    if existing is not None and os.path.realpath(getattr(existing, "__file__", "") or "") == \
            os.path.join(_ROOT, "__init__.py"):
        return existing
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(_ROOT, "__init__.py"), submodule_search_locations=[_ROOT])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return module


def _main() -> int:
    try:
        _load_plugin()
    except Exception as exc:  # a broken checkout: say so in one line
        sys.stderr.write("tencentdb-offload: cannot load the plugin from %s: %s: %s\n"
                         % (_ROOT, type(exc).__name__, exc))
        return 2
    from tencentdb_offload.ops import main  # type: ignore
    return main(sys.argv[1:], plugin_dir=_ROOT)


def _interruptible() -> int:
    try:
        return _main()
    except KeyboardInterrupt:   # Ctrl-C while the plugin still loads: no traceback either
        sys.stderr.write("tencentdb-offload: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(_interruptible())
