"""The README's first example stays under the window on every host the driver emulates: a 64K
window, 20 turns. On 0.22 the engine triggers later on small windows (the host's own floor), so
the driver must pass 0.22's request figure (real usage + an estimate of what was appended since,
CJK counted as the host counts it) or the demo sends more than the window holds."""

import contextlib
import io
import json

import pytest

from tencentdb_offload.ops import main

import helpers


def _as_host(monkeypatch, tmp_path, host_selects_context):
    """A clean environment (no settings, no Hermes home) and the host the driver emulates."""
    for name in list(__import__("os").environ):
        if name.startswith(("TENCENTDB_OFFLOAD_", "HERMES_")) or name == "_HERMES_GATEWAY":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    helpers.as_host(monkeypatch, **{fact: host_selects_context for fact in helpers.SELECTING_HOST})


@pytest.mark.parametrize("host_selects_context", [False, True], ids=["0.17-0.19", "0.22"])
def test_the_demo_never_sends_over_a_64k_window(host_selects_context, monkeypatch, tmp_path):
    _as_host(monkeypatch, tmp_path, host_selects_context)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["demo", "--turns", "20", "--context-length", "64000", "--json"])
    report = json.loads(out.getvalue())
    summary = report["summary"]
    assert summary["largest_request_tokens"] <= report["context_length"], summary
    assert summary["problems"] == [] and code == 0, summary["problems"]
    assert summary["compactions"] >= 1            # the window was under pressure at all


@pytest.mark.parametrize("host_selects_context, said", [
    (False, "a Hermes that does not select context per request"),
    (True, "a Hermes that selects context per request")],
    ids=["0.17-0.19", "0.22"])
def test_the_report_says_whose_checks_it_drove_the_engine_with(host_selects_context, said,
                                                              monkeypatch, tmp_path):
    """`python3 . demo` or `replay` with a Python that imports no Hermes 0.22 emulates 0.19 (a
    75 % trigger on 64K where the user's 0.22 compacts at 85 %): the header says so, and how
    to get 0.22's."""
    _as_host(monkeypatch, tmp_path, host_selects_context)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--turns", "1"]) == 0
    header = out.getvalue().split("\n\n")[0]
    assert said in header, header
    assert host_selects_context or "with the Python of your Hermes" in header, header


def test_a_one_turn_demo_says_one_turn(monkeypatch, tmp_path):
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["demo", "--turns", "1"]) == 0
    title = out.getvalue().splitlines()[0]
    assert "session, 1 turn, seed" in title, title
