"""Text the real Gateway (v2.0.1) cuts or hands back with lone surrogates.

Its truncation keeps a result's first 2000 characters the JavaScript way, in UTF-16 code
units (``slice``): an emoji cut in two leaves its high surrogate alone, which its
``JSON.stringify`` sends as ``\\ud83d``. Seen with the real Gateway: 12 results of emoji-rich
log lines at emergency, 'compact reply refused: 6 repeated, reordered or altered tool calls'
and a local compaction instead. The fake slices and escapes as the real one does.
"""

import json

from fakes.gateway import FakeGateway
from tencentdb_offload.context import messages

from helpers import make_engine


def _conversation(result):
    msgs = [{"role": "system", "content": "sys"}]
    for i in range(12):
        cid = "call_%d" % i
        msgs += [{"role": "user", "content": "turn %d: read the log" % i},
                 {"role": "assistant", "content": "", "tool_calls": [
                     {"id": cid, "type": "function",
                      "function": {"name": "read_file", "arguments": json.dumps({"path": "/l%d" % i})}}]},
                 {"role": "tool", "tool_call_id": cid, "content": result(i)},
                 {"role": "assistant", "content": "ok %d" % i}]
    return msgs


def _sendable(messages):
    json.dumps(messages, ensure_ascii=False).encode("utf-8")     # raises on a lone surrogate
    return True


def test_emoji_cut_in_two_by_the_gateway_truncation_is_mended_not_refused(tmp_path):
    with FakeGateway(api_key="k") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k", instance_id="svc")
        # one character, then emoji: 2000 UTF-16 units end inside the 1000th
        conv = _conversation(lambda i: "%d" % (i % 10) + "🎉" * 1200 + "\nline two" * 600)
        eng.update_from_response({"prompt_tokens": 60_000})
        out = eng.compress(conv, current_tokens=60_000)
        reply = gw.compact_calls("hermes-s1")[-1][1]["messages"]
        assert any(not _utf8(messages.text_of(m)) for m in reply)      # the fake really split one
        st = eng.get_status()["session_stats"]
        assert st["gateway_compactions"] == 1, st.get("last_error")
        assert messages.validation_errors(out) == [] and _sendable(out)


def _utf8(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_a_lone_surrogate_in_a_body_sent_as_utf8_reaches_the_gateway_unchanged(tmp_path):
    # text a tool decoded with surrogateescape (byte 0x80 as '\udc80'); the CJK results make
    # the ASCII-escaped body too large, so it goes as UTF-8. Seen with the real Gateway:
    # 'compact reply refused: 1 current turn not returned unchanged, 12 messages not in the
    # request' (the surrogate had gone out as '?'); the real Gateway parses the JSON escape
    # and returns it as it came, as the fake does
    with FakeGateway(api_key="k", body_limit=120_000) as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k", instance_id="svc",
                              body_limit="120000")
        conv = _conversation(lambda i: "第%d行：函数计算结果正确。\n" % i * 300)
        for m in conv:
            if m["role"] == "user":
                m["content"] += " (bytes \udc80\udcff)"
        eng.update_from_response({"prompt_tokens": 60_000})
        out = eng.compress(conv, current_tokens=60_000)
        st = eng.get_status()["session_stats"]
        assert st["gateway_compactions"] == 1, st.get("last_error")
        assert messages.validation_errors(out) == []
        assert any(m.get("content") == conv[-4]["content"] for m in out)    # the current turn
