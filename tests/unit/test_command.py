import re

from fakes.gateway import FakeGateway
from tencentdb_offload.host.command import make_command

from helpers import as_host, conversation, make_engine


def test_status_help_and_unknown(tmp_path):
    rt, eng = make_engine(tmp_path)
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    cmd = make_command(rt)
    text = cmd("")
    assert "mode: local" in text and "compactions this process: 1 (Gateway 0, local 1)" in text
    assert "no Gateway (local compaction only)" in text and "archive:" in text
    assert "reclaim" in cmd("help") and "python3 <plugin dir> status" in cmd("help")
    assert "unknown subcommand" in cmd("frobnicate")
    assert "no Gateway configured" in cmd("health")


def test_status_shows_the_last_compaction_first_and_reads_well(tmp_path):
    rt, eng = make_engine(tmp_path)
    cmd = make_command(rt)
    assert cmd("status").splitlines()[1] == "  last compaction: none yet"
    eng.compress(conversation(40, 5000), current_tokens=60_000)
    lines = cmd("status").splitlines()
    ev = rt.store.events("compaction", limit=1)[0]
    first = lines[1]
    assert first.startswith("  last compaction: ") and "locally" in first
    assert "%s → %s tokens" % (format(ev["tokens_before"], ","), format(ev["tokens_after"], ",")) in first
    assert "%d items archived" % ev["archived"] in first and "tdai_read_cos" in first
    text = "\n".join(lines)
    assert "60,000 before" in text and "of the 1 session the store knows" in text
    assert "1 sessions" not in text
    assert re.search(r"sessions in memory: \d+ \(at most 20; 0 evicted, their archive stays\) — this "
                     r"Hermes process only; the archive holds 1 session from every process", text)
    assert not any(l != l.rstrip() or "  " in l.strip() for l in lines), lines
    assert not re.search(r"\d{4,}", re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "", text)
                         .replace(str(rt.store.directory), "")), text


def test_gateway_status_health_flush_reclaim(tmp_path):
    with FakeGateway(api_key="k") as gw:
        rt, eng = make_engine(tmp_path, gateway_url=gw.url, api_key="k", retention_days="7")
        cmd = make_command(rt)
        assert cmd("health").startswith("Gateway up: status ok")
        assert "outbox delivered" in cmd("flush")
        text = cmd("status")
        assert gw.url in text and "breaker closed" in text and "k\n" not in text
        # the mode in the shell's words (`python3 <plugin dir> status` says "Gateway at URL")
        assert text.splitlines()[0].startswith("tencentdb-offload status — mode: Gateway at %s;"
                                               % gw.url), text.splitlines()[0]
        assert cmd("reclaim").startswith("reclaimed:")
        gw.set_fault("refuse")
        assert cmd("health").startswith("Gateway not usable")


def test_an_unknown_subcommand_is_not_repeated_back_whole(tmp_path):
    rt, eng = make_engine(tmp_path)
    cmd = make_command(rt)
    text = cmd("x" * 5_000_000 + " status")
    assert text.startswith("unknown subcommand 'xxxx") and "/tencentdb-offload [subcommand]" in text
    assert len(text) < 1_000
    rt.close()


def test_in_the_messaging_gateway_status_names_no_conversation(tmp_path, monkeypatch):
    """The messaging gateway answers the slash command to whoever sends it, and its session
    ids carry other users' chat ids: the status there names no conversation; the figures
    stay. The same status elsewhere names them."""
    chat = "agent:main:telegram:dm:81472093"
    rt, eng = make_engine(tmp_path, session=chat)
    try:
        eng.compress(conversation(40, 5000), current_tokens=60_000)
        cmd = make_command(rt)
        assert chat in cmd("status")
        as_host(monkeypatch, messaging_gateway=True)
        text = cmd("status")
        assert "81472093" not in text, text
        assert "compactions this process: 1" in text and "python3 <plugin dir> status" in text
    finally:
        rt.close()
