"""Settings as the command line reads and checks them: .env as python-dotenv reads it (and an
unreadable one is a failure), config.yaml's null ``store_dir`` and upper-case URL schemes, the
gateway line's fix for a bad URL from config.yaml, and flags checked as the settings are."""

from __future__ import annotations

import json
import os

import pytest

from tencentdb_offload.ops import build_parser, doctor
from tencentdb_offload.ops.env import read_dotenv
from tencentdb_offload.ops.settings_check import check_settings
from tencentdb_offload.settings.config import PREFIX, Settings, load_settings

from test_cli import run_cli


def test_dotenv_with_a_bom_and_a_comment_after_a_quoted_value(tmp_path):
    env = tmp_path / ".env"
    env.write_bytes(b'\xef\xbb\xbfexport KEY="4"  # comment\nB=\'x # y\' #c\nC="a\\"b"\nD=p # n\n')
    assert read_dotenv(env) == {"KEY": "4", "B": "x # y", "C": 'a"b', "D": "p"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_an_unreadable_dotenv_is_reported(tmp_path):
    env = tmp_path / ".env"
    env.write_text("A=1\n")
    env.chmod(0)
    errors = []
    assert read_dotenv(env, errors) == {} and "Permission denied" in errors[0]


def test_a_dotenv_that_cannot_be_read_fails_the_settings_check(tmp_path):
    (tmp_path / ".env").mkdir()
    errors = []
    assert read_dotenv(tmp_path / ".env", errors) == {} and ".env cannot be read" in errors[0]
    assert read_dotenv(tmp_path / "missing", errors) == {} and len(errors) == 1
    c = doctor.Checks()
    check_settings(c, {}, tmp_path, tmp_path / "config.yaml", None)
    lines = [i for i in c.items if i["name"] == "settings"]
    assert lines[0]["status"] == "fail" and "not applied" in lines[0]["message"]
    assert lines[0]["fix"].startswith("mv ")
    assert not any("all settings valid" in i["message"] for i in lines)


def test_a_null_store_dir_in_config_yaml_means_the_default(tmp_path):
    assert load_settings({}, {"store_dir": None}) == (Settings(), [])
    c = doctor.Checks()
    check_settings(c, {}, tmp_path, tmp_path / "config.yaml", {"store_dir": None})
    assert [i["status"] for i in c.items] == ["pass"], c.items


def test_url_schemes_are_case_insensitive():
    settings, warnings = load_settings({PREFIX + "GATEWAY_URL": "HTTP://127.0.0.1:8420"})
    assert warnings == [] and settings.gateway_url == "http://127.0.0.1:8420"


def test_a_bad_gateway_url_from_config_yaml_gets_one_fix_naming_the_block(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("tencentdb_offload:\n  gateway_url: 127.0.0.1:8420\n")
    proc = run_cli("doctor", "--json", "--timeout", "0.3", home=home)
    checks = json.loads(proc.stdout)["checks"]
    setting = next(i for i in checks if i["name"] == "settings" and "gateway_url" in i["message"])
    gateway = next(i for i in checks if i["name"] == "gateway")
    assert gateway["fix"] == setting["fix"] == \
        "hermes config set tencentdb_offload.gateway_url http://127.0.0.1:8420"
    assert "tencentdb_offload.gateway_url is invalid" in gateway["message"]


@pytest.mark.parametrize("value", ["inf", "1e308", "0", "-1", "nan", "soon"])
def test_doctor_timeout_must_be_a_positive_finite_number(tmp_path, value):
    proc = run_cli("doctor", "--timeout", value, home=tmp_path / "home")
    assert proc.returncode == 2 and "--timeout" in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("flag, value", [("--threshold", "1e-9"), ("--ratio", "1e-9"),
                                         ("--gateway", "notaurl"), ("--threshold", "1.5")])
def test_demo_flags_are_checked_as_the_settings_are(tmp_path, flag, value):
    proc = run_cli("demo", flag, value, home=tmp_path / "home")
    assert proc.returncode == 2 and "argument %s:" % flag in proc.stderr, proc.stderr
    assert PREFIX not in proc.stderr


@pytest.mark.parametrize("command", [["demo"], ["replay", "x"]])
def test_a_ratio_at_or_over_the_threshold_is_a_usage_error(tmp_path, command):
    # each flag alone is in range; together no setting allows them: exit 2 naming the flag
    proc = run_cli(*command, "--threshold", "0.6", "--ratio", "0.6", home=tmp_path / "home")
    assert proc.returncode == 2 and "argument --ratio:" in proc.stderr, proc.stderr


def test_demo_flags_the_settings_accept_still_parse():
    args = build_parser().parse_args(["replay", "x", "--threshold", "0.6", "--ratio", "0.3",
                                      "--gateway", "off"])
    assert (args.threshold, args.ratio, args.gateway) == (0.6, 0.3, "off")
    assert build_parser().parse_args(["demo", "--gateway", "HTTPS://h:1"]).gateway == "HTTPS://h:1"


def test_help_gives_the_real_defaults_and_every_command_taking_store():
    sub = build_parser()._subparsers._group_actions[0].choices
    for command in ("demo", "replay"):
        text = " ".join(sub[command].format_help().split())
        assert "COMPACT_RATIO, %g)" % Settings().compact_ratio in text
        assert "THRESHOLD, %g)" % Settings().threshold in text
    epilog = build_parser().epilog
    assert all(name in epilog for name in ("report", "outbox", "archive", "status"))
