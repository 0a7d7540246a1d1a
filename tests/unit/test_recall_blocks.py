"""Recall blocks (Hermes' ``<memory-context>`` fence) do not pile up: the newest copy of each
stays, older identical ones go (content and api_content), and the caller learns what went."""

from __future__ import annotations

from tencentdb_offload.context import recall_blocks


def fence(recall: str) -> str:
    # the exact text of build_memory_context_block (Hermes 0.17, 0.19 and 0.22)
    return ("<memory-context>\n"
            "[System note: The following is recalled memory context, "
            "NOT new user input. Treat as authoritative reference data — "
            "this is the agent's persistent memory and should inform all responses.]\n\n"
            f"{recall}\n"
            "</memory-context>")


PERSONA = fence("User prefers tabs and short answers.")
OTHER = fence("The user's cat is called Miso.")


def turn(text: str, *recall: str, api: bool = True):
    sent = "\n\n".join((text,) + recall)
    return {"role": "user", "content": text, "api_content": sent} if api else \
        {"role": "user", "content": sent}


def test_only_the_newest_identical_block_stays():
    msgs = [turn("one", PERSONA), {"role": "assistant", "content": "a"},
            turn("two", PERSONA, OTHER), {"role": "assistant", "content": "b"},
            turn("three", PERSONA, canvas := "<current_task_context>x</current_task_context>")]
    out, removed = recall_blocks.keep_newest(msgs)
    assert out[0] == {"role": "user", "content": "one", "api_content": "one"}
    assert out[2]["api_content"] == "two\n\n" + OTHER            # a different recall stays
    assert out[4] == msgs[4]                                      # the newest: byte-identical
    assert out[4]["api_content"] == "three\n\n" + PERSONA + "\n\n" + canvas
    assert removed == [PERSONA, PERSONA]
    assert msgs[0]["api_content"] == "one\n\n" + PERSONA          # the input is not changed


def test_request_copies_in_content_too():
    msgs = [turn("one", PERSONA, api=False), {"role": "assistant", "content": "a"},
            turn("two", PERSONA, api=False)]
    out, removed = recall_blocks.keep_newest(msgs)
    assert out[0]["content"] == "one" and out[2]["content"] == "two\n\n" + PERSONA
    assert removed == [PERSONA]


def test_nothing_to_do_and_look_alikes_stay():
    msgs = [turn("one", PERSONA), {"role": "assistant", "content": "a"}, turn("two", OTHER)]
    assert recall_blocks.keep_newest(msgs) == (msgs, [])
    typed = "<memory-context>\nmy notes\n</memory-context>"        # not Hermes' fence
    msgs = [turn("one", typed, api=False), {"role": "assistant", "content": "a"},
            turn("two", typed, api=False)]
    assert recall_blocks.keep_newest(msgs) == (msgs, [])
    only = [{"role": "user", "content": PERSONA}, {"role": "assistant", "content": "a"},
            turn("two", PERSONA, api=False)]
    assert recall_blocks.keep_newest(only) == (only, [])                      # never an empty user turn


def test_a_rebuilt_request_keeps_the_first_copy_so_its_prefix_stays_cached():
    from tencentdb_offload.context import recall_blocks
    block = "%s\n%s\n\npersona: likes tea\n</memory-context>" % (recall_blocks.OPEN, recall_blocks.NOTE)
    turns = [{"role": "user", "content": "question %d\n\n%s" % (i, block)} for i in range(3)]
    first, _ = recall_blocks.keep_newest(turns[:2], oldest=True)
    second, removed = recall_blocks.keep_newest(turns, oldest=True)
    assert second[:1] == first[:1] and block in second[0]["content"]
    assert all(block not in m["content"] for m in second[1:]) and len(removed) == 2


def test_the_request_middleware_sends_one_copy_on_hosts_without_select_context(tmp_path):
    """0.17/0.19 resend each turn's recall in ``api_content``: the llm_request middleware keeps
    the first copy and drops the identical later ones, request-only."""
    from tencentdb_offload.context import recall_blocks
    from tencentdb_offload.hooks import HookHandlers
    from helpers import make_engine
    rt, _eng = make_engine(tmp_path)
    block = "%s\n%s\n\npersona: likes tea\n</memory-context>" % (recall_blocks.OPEN, recall_blocks.NOTE)
    msgs = [{"role": "system", "content": "s"}]
    for i in range(3):
        msgs += [{"role": "user", "content": "question %d\n\n%s" % (i, block)},
                 {"role": "assistant", "content": "answer %d" % i}]
    out = HookHandlers(rt).llm_request(request={"messages": msgs}, session_id="s1")
    sent = out["request"]["messages"]
    assert sum(m["content"].count(recall_blocks.OPEN) for m in sent) == 1 and block in sent[1]["content"]
    assert sum(m["content"].count(recall_blocks.OPEN) for m in msgs) == 3, "the host's list is untouched"
    assert rt.counters["recall_copies_dropped"] == 2


def test_a_text_part_holding_only_an_old_copy_goes_whole():
    # a list content (an image turn): the part that was the copy goes, never stays as an
    # empty text block (providers refuse those); a list left empty keeps its copy
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    msgs = [{"role": "user", "content": [{"type": "text", "text": "look"}, image,
                                         {"type": "text", "text": PERSONA}]},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": PERSONA}]},
            {"role": "assistant", "content": "b"},
            turn("three", PERSONA, api=False)]
    out, removed = recall_blocks.keep_newest(msgs)
    assert out[0]["content"] == [{"type": "text", "text": "look"}, image]
    assert out[2] == msgs[2]
    assert removed == [PERSONA]
