"""Hermes 0.17-0.22 price an image part at a flat 1,500 tokens in the estimates they pass to
``should_compress`` (``estimate_messages_tokens_rough``: the base64 data is stripped), never at
its base64 length. The demo/replay driver stands in for them: a session with screenshots far
under the trigger must not compact every turn (it did: 6 compactions, "1,019,388 tokens saved"
on a session whose largest request was 24 % of the window)."""

from __future__ import annotations

import json

import pytest

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)

from tencentdb_offload.ops.host_emulation import HOST_IMAGE_TOKENS, HOSTS, Pressure

PNG = "data:image/png;base64," + "iVBORw0KGgo" * 20_000        # ~220K characters


def image_turn(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text},
                                        {"type": "image_url", "image_url": {"url": PNG}}]}


@pytest.mark.parametrize("host", HOSTS)
def test_the_host_figure_prices_an_image_flat(host):
    text_only = {"messages": [{"role": "user", "content": "look"}], "tools": []}
    with_image = {"messages": [image_turn("look")], "tools": []}
    p = Pressure(host)
    extra = p.rough(with_image) - p.rough(text_only)
    assert HOST_IMAGE_TOKENS <= extra < HOST_IMAGE_TOKENS + 50, extra


def test_a_session_with_screenshots_under_the_trigger_does_not_compact(home, tmp_path):
    msgs = []
    for t in range(5):
        call = {"id": "c%d" % t, "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "ui%d.css" % t})}}
        msgs += [image_turn("what is wrong on this screen (%d)?" % t),
                 {"role": "assistant", "content": None, "tool_calls": [call]},
                 {"role": "tool", "tool_call_id": "c%d" % t, "content": "margin: 0 auto; " * 1000},
                 {"role": "assistant", "content": "The button is misaligned (%d)." % t}]
    path = tmp_path / "screens.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    rep = report_of(run_cli("replay", str(path), "--context-length", "64000", "--json",
                            home=home, env=LOCAL))
    assert rep["summary"]["largest_request_tokens"] < rep["threshold_tokens"]
    assert rep["summary"]["compactions"] == 0, rep["compactions"]
    assert rep["summary"]["tokens_saved"] == 0
