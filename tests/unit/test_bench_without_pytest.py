"""``python3 bench/run.py`` runs where pytest is not installed (a fresh machine's python3,
the tokenizer venv the token check runs in): the benchmarks load the plugin without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

NO_PYTEST = r"""
import sys
sys.modules["pytest"] = None            # "import pytest" raises ImportError, as where it is absent
sys.path.insert(0, sys.argv[1])
import _common
plugin = _common.load_plugin()
print(plugin.__name__, hasattr(plugin, "register"))
"""


def test_the_benchmarks_load_the_plugin_without_pytest():
    proc = subprocess.run([sys.executable, "-c", NO_PYTEST, str(ROOT / "bench")],
                          capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["tencentdb_offload", "True"]
