"""Status and doctor say what applies to this host and this window (issue 53, item 6): the
messaging gateway's lower landing (35 % of an 85K-128K window) only where it can apply, on a
host that selects context and a window it is for; not on a host that does not (the one shown
beside Hermes' 0.19 figures), nor on a 64K window."""

from __future__ import annotations

import pytest

from helpers import SELECTING_HOST, as_host, make_engine
from tencentdb_offload.hermes.host import Host
from tencentdb_offload.hermes.releases import of_release
from tencentdb_offload.host.command import make_command
from tencentdb_offload.ops import doctor
from tencentdb_offload.ops.settings_check import check_settings
from tencentdb_offload.settings.config import load_settings
from tencentdb_offload.settings.thresholds import Trigger, landing_text, trigger_text

LANDING_NOTE = "35% of an 85K-128K window"
MESSAGING = dict(SELECTING_HOST, messaging_gateway=True)


@pytest.mark.parametrize("facts, window, said", [
    ({}, 100_000, False),               # a host that neither selects context nor pools
    (MESSAGING, 64_000, False),         # a window the messaging gateway's landing is not for
    (MESSAGING, 200_000, False),
    (MESSAGING, 100_000, True),
], ids=["not-selecting-100K", "messaging-64K", "messaging-200K", "messaging-100K"])
def test_the_slash_command_says_the_messaging_landing_only_where_it_applies(
        tmp_path, monkeypatch, facts, window, said):
    as_host(monkeypatch, **facts)
    rt, _eng = make_engine(tmp_path, context_length=window)
    try:
        text = make_command(rt)("status")
    finally:
        rt.close()
    assert (LANDING_NOTE in text) == said, text


def _doctor_settings_line(tmp_path, host) -> str:
    checks = doctor.Checks()
    check_settings(checks, {"TENCENTDB_OFFLOAD_STORE_DIR": str(tmp_path / "store")},
                   tmp_path / "home", tmp_path / "home" / "config.yaml", {}, None, host)
    (line,) = [c["message"] for c in checks.items if c["name"] == "settings"]
    return line


def test_doctor_says_the_hosts_rules_only_for_a_release_that_has_them(tmp_path):
    """No compaction recorded yet (the window not known): the Hermes on PATH decides."""
    selecting, plain = of_release((0, 22, 2)), of_release((0, 19, 0))
    assert selecting.selects_context and not plain.selects_context
    assert LANDING_NOTE in _doctor_settings_line(tmp_path, selecting)
    assert "small-window floor" in _doctor_settings_line(tmp_path, selecting)
    line = _doctor_settings_line(tmp_path, plain)
    assert LANDING_NOTE not in line and "small-window floor" not in line, line
    assert LANDING_NOTE in _doctor_settings_line(tmp_path, None), "a host not known: it may apply"


def test_the_landing_note_follows_the_window():
    unset = load_settings({})[0]
    for host in (None, Host(**MESSAGING)):
        assert LANDING_NOTE in landing_text(unset, None, host)
        assert LANDING_NOTE in landing_text(unset, Trigger(85_000, 100_000), host)
        assert LANDING_NOTE not in landing_text(unset, Trigger(54_400, 64_000), host)
        assert LANDING_NOTE not in landing_text(unset, Trigger(150_000, 200_000), host)
    assert LANDING_NOTE not in landing_text(unset, None, Host())
    assert "small-window floor" not in trigger_text(unset, None, Host())


@pytest.mark.parametrize("window", [64_000, 72_000, 85_000])
def test_the_floor_note_names_the_trigger_the_floor_gives(tmp_path, window):
    """Issue 53, a newcomer's walk: before any compaction, doctor and status said "the
    built-in's on a 64K-85K window, 85% at 64K" where the host with the floor compacts at 90%
    of such a window (status said 90% after the first compaction): the note names what
    ``applying_trigger`` gives there, not the built-in's figure it never comes before."""
    from tencentdb_offload.settings.thresholds import applying_trigger
    unset = load_settings({})[0]
    applied = applying_trigger(unset, window, host_floor=True)
    said = "%.0f%% of a 64K-85K window" % (applied.ratio * 100)
    line = _doctor_settings_line(tmp_path, of_release((0, 22, 2)))
    assert said in line, line
    assert said in trigger_text(unset, None, None)
    assert "85% at 64K" not in line, line
