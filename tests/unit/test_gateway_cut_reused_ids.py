"""A result the Gateway truncated or replaced points at the text it came from: trimmed further
or gone from the context, under a call id the provider reused (then or later), its key reads
that text back."""

import json
import re

from fakes.gateway import FakeGateway
from tencentdb_offload.context.messages import text_of, tool_results
from tencentdb_offload.context.tokens import messages_tokens
from tencentdb_offload.hooks import HookHandlers
from tencentdb_offload.ops.driver import read_whole

from helpers import make_engine

POINTER = re.compile(r'tdai_read_cos\((?:tool_call_id|key)="(c0[^"]*)"|\[(c0(?:~[0-9a-f]{8})?)\]')


def step(cid, text):
    return [{"role": "assistant", "content": None, "tool_calls": [{
                "id": cid, "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "/" + cid})}}]},
            {"role": "tool", "tool_call_id": cid, "content": text}]


def transcript(first, second):
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "look"}]
    msgs += step("c0", first) + [{"role": "assistant", "content": "ok"},
                                 {"role": "user", "content": "again"}]
    msgs += step("c0", second) + [{"role": "assistant", "content": "done"}]
    for i in range(14):
        msgs += [{"role": "user", "content": "turn %d" % i}]
        msgs += step("k%d" % i, ("line %d of k%d\n" % (i, i)) * 2000)
        msgs += [{"role": "assistant", "content": "read %d" % i}]
    return msgs + [{"role": "user", "content": "now sum it up"}]


def read_back(eng, key):
    """The whole text a key reads back, page after page (None when it names nothing)."""
    return read_whole(eng, key)[0]


def keys_shown(messages):
    """Every key of c0 the context names: pointers, and the digest's ``[id]``."""
    return {a or b for m in messages for a, b in POINTER.findall(text_of(m))}


def test_a_gateway_cut_of_a_reused_id_points_at_its_source(tmp_path):
    first, second = "short first text", "".join("second %05d\n" % i for i in range(12000))
    msgs = transcript(first, second)
    with FakeGateway(api_key="k1") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k1", instance_id="svc")
        hooks = HookHandlers(rt)
        for m in msgs:
            for tid, text in tool_results(m):
                hooks.post_tool_call(tool_name="read_file", args={}, result=text,
                                     session_id="s1", tool_call_id=tid)
        rt.flush_writes()
        out = eng.compress(msgs, current_tokens=eng.threshold_tokens + 1000)
        assert gw.compact_calls(), "the Gateway compacted"
        cut = [t for m in out for tid, t in tool_results(m) if tid == "c0" and len(t) > 1000]
        assert cut and second not in cut, "the Gateway truncated the reused id's long text"
        # later, without the Gateway: the cut is trimmed further, or leaves the context
        gw.set_fault("refuse")
        more = list(out[:-1]) + [{"role": "assistant", "content": "ok"}]
        for i in range(14, 20):
            more += [{"role": "user", "content": "turn %d" % i}]
            more += step("k%d" % i, ("line %d of k%d\n" % (i, i)) * 2000)
            more += [{"role": "assistant", "content": "read %d" % i}]
        more.append({"role": "user", "content": "and now?"})
        for m in more[len(out):]:
            for tid, text in tool_results(m):
                hooks.post_tool_call(tool_name="read_file", args={}, result=text,
                                     session_id="s1", tool_call_id=tid)
        rt.flush_writes()
        errors = len(list(rt.errors))
        again = eng.compress(more, current_tokens=eng.threshold_tokens + 1000)
        assert not [e for e in list(rt.errors)[errors:] if "does not hold" in e]
        for shown in (out, again):
            keys = keys_shown(shown)
            assert keys and all(read_back(eng, k) in (first, second) for k in keys), keys
        assert second in {read_back(eng, k) for k in keys_shown(again)}
        rt.close()


def test_an_id_reused_after_the_gateway_replaced_its_result_reads_that_result(tmp_path):
    first = "".join("first %05d\n" % i for i in range(3000))
    msgs = transcript(first, "")[:2] + [{"role": "assistant", "content": "hello"},
                                         {"role": "user", "content": "read c0"}]
    msgs += step("c0", first) + transcript("", "")[9:]      # c0 once, then the k reads
    with FakeGateway(api_key="k1") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k1", instance_id="svc")
        hooks = HookHandlers(rt)

        def record(messages):
            for m in messages:
                for tid, text in tool_results(m):
                    hooks.post_tool_call(tool_name="read_file", args={}, result=text,
                                         session_id="s1", tool_call_id=tid)
            rt.flush_writes()
        record(msgs)
        assert rt.flush("s1", 5)                    # the Gateway holds them: it may replace them
        out = eng.compress(msgs, current_tokens=messages_tokens(msgs))      # (the host's count)
        assert first not in [t for m in out for tid, t in tool_results(m) if tid == "c0"]
        gw.set_fault("refuse")                      # later: the provider reuses c0, no Gateway
        more = list(out[:-1]) + [{"role": "assistant", "content": "ok"},
                                 {"role": "user", "content": "read it again"}]
        more += step("c0", "c0 now says something else") + [{"role": "assistant", "content": "ok"}]
        for i in range(14, 114):     # many short reads: only whole turns leaving make room
            more += [{"role": "user", "content": "turn %d" % i}]
            more += step("k%d" % i, ("line %d of k%d\n" % (i, i)) * 120)
            more += [{"role": "assistant", "content": "read %d" % i}]
        more.append({"role": "user", "content": "and now?"})
        record(more[len(out):])
        again = eng.compress(more, current_tokens=eng.threshold_tokens + 1000)
        keys = keys_shown(again)
        assert keys, "c0's first result left the context, named in the digest"
        assert all(read_back(eng, k) in (first, "c0 now says something else") for k in keys), keys
        rt.close()


def test_a_reference_quoting_one_text_of_a_reused_id_names_that_text(tmp_path):
    """The Gateway's mild level replaces a result by a reference that quotes its head; the
    request held both texts of the reused id, the older one already as our trim."""
    from tencentdb_offload.context import gateway_cuts, result_keys
    from tencentdb_offload.context.fallback import trim_result
    rt, _eng = make_engine(tmp_path)
    older, newer = "older text " * 2000, "newer text " * 3000
    trimmed = trim_result(step("c0", older)[1], 2000, seal=rt.seal, reused={"c0"})
    sent = [trimmed] + [step("c0", newer)[1]]
    ref = ("[Offloaded Tool Result | node: 001-N3]\nSummary: read_file result: %s\n"
           'see tdai_read_cos(path="offload/refs/c0.md")')
    reply = [dict(sent[0], content=ref % older[:150]), dict(sent[1], content=ref % newer[:150])]
    out = gateway_cuts.keyed(sent, reply, {"c0"})
    keys = [result_keys.pointer_in("c0", t) for m in out for _i, t in tool_results(m)]
    assert keys == [result_keys.suffixed("c0", older), result_keys.suffixed("c0", newer)]
    rt.close()


def test_a_reference_quoting_an_older_text_of_the_id_names_the_text_it_replaced():
    """The Gateway keys its references by call id: under a reused id it replaces the newer
    result by the reference of the older text, which the request no longer holds."""
    from tencentdb_offload.context import gateway_cuts, result_keys
    older, newer = "older text " * 2000, "newer text " * 3000
    sent = [step("c0", newer)[1]]
    reply = [dict(sent[0], content="[Offloaded Tool Result | node: 001-N8]\nSummary: read_file "
                                   "result: %s" % older[:150])]
    out = gateway_cuts.keyed(sent, reply, {"c0"})
    keys = [result_keys.pointer_in("c0", t) for m in out for _i, t in tool_results(m)]
    assert keys == [result_keys.suffixed("c0", newer)]


def test_a_cut_that_holds_a_short_text_of_a_reused_id_whole_names_it():
    """A cut of a message whose results were taken as one text holds the id's short text
    whole, then the next result's: it stands for that short text."""
    from tencentdb_offload.context import gateway_cuts, result_keys
    older, short = "older text " * 2000, "the short newer text of c0"
    sent = [step("c0", older)[1], step("c0", short)[1]]
    notice = "\n\n[... content truncated, only first 2000 characters retained ...]"
    reply = [sent[0], dict(sent[1], content=(short + " k1 " + "k1 text " * 400)[:2000] + notice)]
    out = gateway_cuts.keyed(sent, reply, {"c0"})
    keys = [result_keys.pointer_in("c0", t) for m in out for _i, t in tool_results(m)]
    assert keys == ["", result_keys.suffixed("c0", short)]


def test_one_reference_for_every_text_of_a_reused_id_names_each_text_it_replaced():
    """The Gateway keys its references by call id: both results of a reused id came back as
    the reference of a third, older text, quoting neither. Every result came back, in order,
    so each is the text sent at its place (found by a seeded long session with a 30K cap)."""
    from tencentdb_offload.context import gateway_cuts, result_keys
    first, second = "c0 #3: def f(x)\n" * 900, "c0 #10: [CONTEXT SUMMARY] " * 900
    sent = [step("c0", first)[1], step("c0", second)[1]]
    ref = ("[Offloaded Tool Result | node: 001-N1]\nSummary: read_file result: c0 #2: abc abc\n"
           'see tdai_read_cos(path="offload/refs/c0.md")')
    reply = [dict(sent[0], content=ref), dict(sent[1], content=ref)]
    out = gateway_cuts.keyed(sent, reply, {"c0"})
    keys = [result_keys.pointer_in("c0", t) for m in out for _i, t in tool_results(m)]
    assert keys == [result_keys.suffixed("c0", first), result_keys.suffixed("c0", second)]
