"""Whatever config.yaml holds, settings load in bounded time and memory: a YAML anchor bomb
(a few hundred bytes that expand to billions of items when walked) is refused by its type,
and a value is never turned into text before its type and size are checked."""

from __future__ import annotations

import tracemalloc

import pytest

from tencentdb_offload.settings.config import load_settings
from tencentdb_offload.hermes.config import read_config

from helpers import run_cli


BOMB = "tencentdb_offload:\n  a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n" + "".join(
    "  %s: &%s [%s]\n" % (n, n, ",".join(["*" + p] * 9)) for p, n in zip("abcdefgh", "bcdefghi")) + \
    "  threshold: [%s]\n  gateway_url: *i\n" % ",".join(["*i"] * 9)


def bomb(depth: int) -> list:
    """What a YAML loader builds from an anchor bomb: 9**depth leaves, ~9*depth objects."""
    node: list = ["x"] * 9
    for _ in range(depth - 1):
        node = [node] * 9
    return node


def test_a_structure_where_a_value_belongs_is_refused_by_its_type():
    s, warnings = load_settings({}, {"threshold": bomb(6), "compact_ratio": {"a": 1}})
    from tencentdb_offload.settings.config import Settings
    assert (s.threshold, s.compact_ratio) == (Settings().threshold, Settings().compact_ratio)
    text = "\n".join(warnings)
    assert "tencentdb_offload.threshold=(a list) is invalid (must be a single value, not a list)" in text
    assert "compact_ratio=(a mapping)" in text


def test_an_anchor_bomb_loads_in_bounded_memory():
    block = {"threshold": bomb(12), "gateway_url": bomb(12), "api_key": bomb(12),
             "store_dir": "x" * 10_000_000}
    tracemalloc.start()
    try:
        s, warnings = load_settings({}, block)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak
    assert s.gateway_url == "" and len(warnings) == 4     # a bad URL turns the Gateway off
    assert "is 10000000 characters long" in "\n".join(warnings)


def test_the_bomb_as_a_file_through_the_config_reader_doctor_and_status(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(BOMB)
    assert len(BOMB) < 512
    config = read_config(home)
    settings, warnings = load_settings({}, config.block())
    if config.block() is not None and config.reader != "stdlib reader":  # a real YAML loader
        assert any("(a list)" in w for w in warnings)
    for args in (["status"], ["doctor", "--json", "--timeout", "0.3"]):
        proc = run_cli(args, env={"HERMES_HOME": str(home)})
        assert "internal error" not in proc.stderr and len(proc.stdout) < 20_000, proc.stderr
