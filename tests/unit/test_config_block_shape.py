"""A ``tencentdb_offload:`` block that is a list or a bare value (``tencentdb_offload: 0.7``,
``- threshold: 0.6``) was dropped without a word (doctor: "all settings valid"); demo and
replay of a bare number died with "internal error: TypeError". Now every command says that
none of it is applied."""

import pytest

from tencentdb_offload.settings.config import Settings, load_settings

from test_cli import run_cli


@pytest.mark.parametrize("block", [[{"threshold": 0.6}], 0.7, "threshold: 0.6"])
def test_a_block_that_is_no_mapping_is_named(block):
    settings, warnings = load_settings({}, block)
    assert settings.threshold == Settings().threshold
    assert any("tencentdb_offload: block" in w and "none of it is applied" in w for w in warnings)


@pytest.mark.parametrize("yaml", ["tencentdb_offload: 0.7\n",
                                  "tencentdb_offload:\n  - threshold: 0.6\n"])
def test_every_command_says_so(tmp_path, yaml):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(yaml)
    for command in (["status"], ["demo", "--turns", "2"], ["doctor", "--timeout", "1"]):
        proc = run_cli(*command, home=home)
        assert "internal error" not in proc.stderr, proc.stderr
        assert "none of it is applied" in proc.stdout, (command, proc.stdout[-1500:])
