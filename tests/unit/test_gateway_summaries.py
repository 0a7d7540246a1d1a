"""What the plugin keeps of the Gateway's L1 summaries (the results its mild level replaced):
the summary itself. A digest line used to show the Gateway's header, "[Offloaded Tool Result |
node: N/A]", as the summary of every result it had replaced: words that said nothing, in every
request after."""

from tencentdb_offload.context import departures, digest
from tencentdb_offload.context.provenance import Seal

REF = '原始工具结果已存档，如需查看完整内容请调用 tdai_read_cos(path="offload/s/refs/c1.md")'


def replaced(tid, text):
    return {"role": "tool", "tool_call_id": tid, "content": text}


def test_the_summary_is_kept_without_the_gateways_header_and_archive_line():
    found = departures.gateway_summaries([
        {"role": "assistant", "content": "", "tool_calls": []},
        replaced("c1", "[Offloaded Tool Result | node: 001-N2]\nSummary: read a.py: it defines "
                       "parse()\nand load()\n" + REF),
        replaced("c2", "[Offloaded Tool Result | node: N/A]\nSummary: [L1 parse incomplete]\n" + REF),
        replaced("c3", "[Offloaded Tool Result | node: N/A]"),
        replaced("c4", "[Offloaded Tool Result | node: N/A]\nSummary: short one"),
        replaced("c5", "a result that mentions\nSummary: but is no replacement"),
    ])
    assert found == {"c1": "read a.py: it defines parse() and load()", "c4": "short one"}


def test_a_digest_line_shows_the_summary_not_the_header_nor_the_call_again():
    cut = [{"role": "user", "content": "read a.py please"},
           {"role": "assistant", "content": "", "tool_calls": [
               {"id": "c1", "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]},
           replaced("c1", "[Offloaded Tool Result | node: 001-N2]\nSummary: read_file a.py: it "
                          "defines parse()\n" + REF)]
    pair, _ = digest.build([], cut, seal=Seal(b"d" * 32), cap=2_000,
                           summaries=departures.gateway_summaries(cut))
    body = pair[-1]["content"]
    assert "read_file a.py [c1]" in body and "[c1] summary: it defines parse()\n" in body
    assert "Offloaded Tool Result" not in body.replace("[Offloaded Tool Result]", "")
