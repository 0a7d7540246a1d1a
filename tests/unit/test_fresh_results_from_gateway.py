"""The results the model asked for and has not read yet (the newest step's, mid-turn) are cut by
a Gateway's reply no more than by our own compaction (issue 29: the real Gateway truncates the
biggest results first, the current turn's included, and the CLI and messaging side-by-sides
counted more results no request ever carried whole with it than without it). The reply's cut
of them is undone and our tightening trims as few as fit, so with a Gateway as many stay whole
as without one."""

import pytest

from fakes.gateway import FakeGateway
from tencentdb_offload.context import messages
from tencentdb_offload.context.tokens import messages_tokens

from helpers import SELECTING_HOST, as_host, conversation, make_engine, tool_turn

WINDOW = 64_000
BIG = 20_000                        # chars: the tamper cuts results longer than this


def newest_step(shape, size):
    """The current turn mid-way: the user asked, the model read three files of ``size`` words."""
    return tool_turn(9, size, shape, calls=3, text="word ")[:-1]


def cut_biggest(msgs):
    """A /compact reply that truncates every big result to its first 2,000 characters (the
    real Gateway's emergency level), in either message shape."""
    out = []
    for m in msgs:
        if m.get("role") == "tool" and len(str(m.get("content"))) > BIG:
            m = dict(m, content=m["content"][:2000])
        elif isinstance(m.get("content"), list):
            m = dict(m, content=[dict(b, content=b["content"][:2000])
                                 if b.get("type") == "tool_result" and len(str(b.get("content"))) > BIG
                                 else b for b in m["content"]])
        out.append(m)
    return out


def whole_fresh(out, before):
    """How many of the newest step's results (the last four messages) ``out`` carries as
    ``before`` did."""
    wanted = {tid: text for m in before[-4:] for tid, text in messages.tool_results(m)}
    got = {tid: text for m in out for tid, text in messages.tool_results(m)}
    return sum(1 for tid, text in wanted.items() if got.get(tid) == text)


def compact(tmp_path, before, gateway=None):
    extra = dict(gateway_url=gateway.url, api_key="k") if gateway else {}
    rt, eng = make_engine(tmp_path, context_length=WINDOW, **extra)
    out = eng.compress(before, current_tokens=messages_tokens(before))
    stats = eng.get_status()["session_stats"]
    rt.close()
    assert messages.validation_errors(out) == []
    return out, stats


# 12,000 words: two of the three fit whole (one message each); 8,000: all three (the Anthropic
# shape holds them in one message, whole or trimmed together)
@pytest.mark.parametrize("shape,size", [("openai", 12_000), ("openai", 8_000), ("anthropic", 8_000)])
def test_a_gateway_that_cuts_fresh_results_hides_no_more_of_them_than_our_own_compaction(tmp_path, shape, size):
    before = conversation(8, 12_000, shape, calls=2) + newest_step(shape, size)
    local, _ = compact(tmp_path / "local", before)
    with FakeGateway(api_key="k") as gw:
        gw.tamper = cut_biggest
        via, stats = compact(tmp_path / "gateway", before, gw)
    assert stats["gateway_compactions"] == 1            # the Gateway's reply was used, repaired
    assert whole_fresh(local, before) >= 1              # the case keeps some whole at all
    assert whole_fresh(via, before) >= whole_fresh(local, before)
    assert messages_tokens(via) <= int(WINDOW * 0.75)   # under the trigger all the same


def _with_canvas(tmp_path, before, threshold):
    from tencentdb_offload.context import canvas

    rt, eng = make_engine(tmp_path, context_length=WINDOW, threshold=threshold)
    # dense text (a canvas is cut at 8,500 characters): its tokens still take room
    block = canvas.format_block("001-task.mmd", "flowchart TD\n" + "".join(
        "  N%d[第%d步：读取并比较这些文件]\n" % (k, k) for k in range(250)))
    assert messages_tokens([{"role": "user", "content": block}]) > 2_500      # the case: a big canvas
    eng.current_state().set_canvas(block)
    out = eng.compress(before, current_tokens=messages_tokens(before))
    target = rt.settings.target_tokens(WINDOW)
    rt.close()
    assert messages.validation_errors(out) == []
    return out, target


def test_the_task_canvas_does_not_crowd_out_unread_results(tmp_path):
    """The canvas shown beside the list takes its room from the target; the newest step's
    unread results may use that room, so showing the canvas hides no more of them than not
    showing it (the real-Gateway arm of the CLI side-by-side on 0.22, trigger 0.85, hid 5
    where the plugin without a Gateway hid 3: a ~1.7K-token canvas took one result's room)."""
    before = conversation(8, 12_000, "openai", calls=2) + newest_step("openai", 10_000)
    plain, _ = compact(tmp_path / "plain", before)
    shown, _ = _with_canvas(tmp_path / "canvas", before, 0.85)
    assert whole_fresh(plain, before) == 3              # all three fit whole without a canvas
    assert whole_fresh(shown, before) == 3
    assert messages_tokens(shown) + messages_tokens(before[-4:]) <= int(WINDOW * 0.85)


def test_unread_results_use_the_canvas_room_only_with_room_for_a_step_more(tmp_path):
    """Kept whole over the target, they would make the next step of their size pass the
    trigger (0.75) and compact again: one cache break more. There the target holds."""
    before = conversation(8, 12_000, "openai", calls=2) + newest_step("openai", 10_000)
    shown, target = _with_canvas(tmp_path, before, 0.75)
    assert whole_fresh(shown, before) == 2              # as few trimmed as fit the target


MESSAGING_WINDOW = 100_000


def _landing_low(tmp_path, before, monkeypatch):
    """A compaction in 0.22's messaging gateway on a 100K window, with its defaults (trigger
    0.85, landing 0.35), no Gateway, no canvas."""
    as_host(monkeypatch, **SELECTING_HOST, messaging_gateway=True)
    rt, eng = make_engine(tmp_path, context_length=MESSAGING_WINDOW, gateway_url="off")
    eng.update_model(model="m", context_length=MESSAGING_WINDOW)
    out = eng.compress(before, current_tokens=messages_tokens(before))
    target, trigger = eng.compaction_target(), eng.threshold_tokens
    rt.close()
    assert (target, trigger) == (35_000, 85_000), "the messaging gateway's defaults apply"
    assert messages.validation_errors(out) == []
    return out, target, trigger


def test_a_low_landing_hides_no_unread_result_that_leaves_room_for_a_step_more(tmp_path, monkeypatch):
    """In 0.22's messaging gateway the landing is where older history goes down to; the newest
    step's results the model asked for and has not read stay whole over it while a step more
    of their size still fits under the trigger (the held-out messaging shape at 0.35: 24 of 432 reads
    never reached the model whole when only the canvas' room was theirs)."""
    before = conversation(12, 12_000, "openai", calls=2) + newest_step("openai", 16_000)
    step = messages_tokens(before[-4:])
    out, target, trigger = _landing_low(tmp_path, before, monkeypatch)
    assert step > target, "the case: the step alone is over the landing"
    assert whole_fresh(out, before) == 3
    assert messages_tokens(out) + step <= trigger, "a step more of their size fits"
    assert messages_tokens(out) < messages_tokens(before) - step, "older history left"


def test_unread_results_too_big_for_a_step_more_are_trimmed_to_the_landing(tmp_path, monkeypatch):
    """Results so big that a step more of them would pass the trigger get no room over the
    landing: as few are trimmed as fit it."""
    before = conversation(12, 12_000, "openai", calls=2) + newest_step("openai", 24_000)
    out, target, trigger = _landing_low(tmp_path, before, monkeypatch)
    assert trigger - messages_tokens(before[-4:]) < target, "the case: no room for a step more"
    assert whole_fresh(out, before) < 3
    assert messages_tokens(out) <= target * 1.05


def _at_the_floor(tmp_path, monkeypatch, before, **host):
    """A compaction on a 64K window of a host with the small-window floor, no Gateway."""
    as_host(monkeypatch, **SELECTING_HOST, **host)
    rt, eng = make_engine(tmp_path, context_length=WINDOW, gateway_url="off")
    eng.update_model(model="m", context_length=WINDOW)
    out = eng.compress(before, current_tokens=messages_tokens(before))
    trigger = eng.threshold_tokens
    rt.close()
    assert trigger == int(WINDOW * 0.9), "the small-window floor's trigger"
    assert messages.validation_errors(out) == []
    return out, trigger


def test_at_the_small_window_floor_a_mid_turn_compaction_keeps_the_step_whole(tmp_path, monkeypatch):
    """In 0.22's messaging gateway on a 64K window the trigger is the ceiling and the turn start
    compacts before a step that would pass it; a mid-turn compaction comes only when the
    host's pool refused that one, and it keeps the step the model has not read whole while a
    step more of its size fits under the trigger (the side-by-side hid a step's three reads
    there when they were trimmed to the landing, as the CLI's compaction does). The system
    prompt is Hermes' size."""
    system = {"role": "system", "content": "Follow the house rules. " * 2_000}
    before = [system] + conversation(12, 12_000, "openai", calls=2) + newest_step("openai", 7_800)
    step = messages_tokens(before[-4:])
    cli, _ = _at_the_floor(tmp_path / "cli", monkeypatch, before)
    assert whole_fresh(cli, before) < 3, "the case: the landing alone has no room for the step"
    out, trigger = _at_the_floor(tmp_path / "messaging", monkeypatch, before, messaging_gateway=True)
    assert whole_fresh(out, before) == 3
    assert messages_tokens(out) + step <= trigger, "a step more of their size fits"
