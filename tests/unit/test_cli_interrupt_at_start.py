"""Ctrl-C in the first tenth of a second, while the plugin's modules still load, printed a
KeyboardInterrupt traceback; the command's own handler only covers what runs after."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LOADING = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tdo_cli_entry", sys.argv[1])
entry = importlib.util.module_from_spec(spec)
spec.loader.exec_module(entry)
def loading():                      # as if Ctrl-C came while the plugin is imported
    raise KeyboardInterrupt
entry._load_plugin = loading
sys.exit(entry._interruptible() if hasattr(entry, "_interruptible") else entry._main())
"""


def test_ctrl_c_while_loading_is_one_line_and_exit_130():
    proc = subprocess.run([sys.executable, "-c", LOADING, str(ROOT / "__main__.py")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "tencentdb-offload: interrupted", proc.stderr
