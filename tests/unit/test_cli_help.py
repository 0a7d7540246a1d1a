"""The top-level ``--help`` names every command it dispatches, and says where --store and
--json go; the demo reports how long it took (measured, not a claim); bench counts targets
met among the figures that have one."""

import importlib.util
from pathlib import Path

from test_cli import run_cli
from tencentdb_offload.ops import build_parser

# by path, under its own name: bench's modules expect to be top-level, tests must not shadow them
_spec = importlib.util.spec_from_file_location(
    "tdo_bench_report", Path(__file__).resolve().parents[2] / "bench" / "report.py")
bench_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_report)


def test_top_level_help_names_every_command(tmp_path):
    proc = run_cli("--help", home=tmp_path / "home")
    assert proc.returncode == 0
    description = proc.stdout.split("positional arguments")[0]
    commands = build_parser()._subparsers._group_actions[0].choices
    assert commands and all("(%s)" % name in description for name in commands), description
    assert "--store DIR" in proc.stdout and "--json" in proc.stdout


def test_the_demo_reports_its_own_duration(tmp_path):
    proc = run_cli("demo", "--turns", "3", home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert "took" in proc.stdout and " s (wall clock" in proc.stdout


def test_bench_counts_targets_among_figures_that_have_one():
    rows = [{"id": "a", "met": True}, {"id": "b", "met": False}, {"id": "c", "met": None}]
    line = bench_report.targets_line(rows)
    assert line.startswith("1 of 2 figures with a target") and "(1 without a target)" in line
    assert "missed: b" in line


def test_each_command_s_help_speaks_of_itself():
    """`demo --help` said "replay reads model.context_length": the demo reads it too, and the
    text named another command."""
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("demo", "replay"):
        text = commands[name].format_help()
        assert "model.context_length" in text, name
    assert "replay reads" not in " ".join(commands["demo"].format_help().split())
