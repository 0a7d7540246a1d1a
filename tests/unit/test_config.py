from tencentdb_offload.settings.config import load_settings, redact


def _documented_defaults():
    """``{NAME: default}`` from the README's Settings table: the defaults users are promised."""
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `TENCENTDB_OFFLOAD_([A-Z_]+)` \| `([^`]*)` \|", readme, re.M))


def test_defaults_are_the_documented_ones():
    s, warnings = load_settings({})
    assert warnings == []
    documented = _documented_defaults()
    assert s.gateway_url == documented["GATEWAY_URL"] and s.api_key == documented["API_KEY"]
    assert s.instance_id == documented["INSTANCE_ID"] and s.enabled
    for name in ("COMPACT_RATIO", "THRESHOLD", "TIMEOUT_MS", "INGEST_TIMEOUT_MS"):
        assert getattr(s, name.lower()) == float(documented[name]), name
    assert s.compact_ratio < s.threshold


def test_bad_values_warn_and_use_defaults():
    env = {"TENCENTDB_OFFLOAD_THRESHOLD": "lots", "TENCENTDB_OFFLOAD_TIMEOUT_MS": "-5",
           "TENCENTDB_OFFLOAD_ENABLED": "maybe", "TENCENTDB_OFFLOAD_GATEWAY_URL": "ftp://x"}
    s, warnings = load_settings(env)
    assert s.threshold == 0.75 and s.timeout_ms == 90000 and s.enabled
    assert s.gateway_url == "" and not s.gateway_enabled    # never silently the default URL
    assert len(warnings) == 4
    joined = "\n".join(warnings)
    for name in ("TENCENTDB_OFFLOAD_THRESHOLD='lots'", "TENCENTDB_OFFLOAD_TIMEOUT_MS='-5'",
                 "TENCENTDB_OFFLOAD_ENABLED='maybe'", "TENCENTDB_OFFLOAD_GATEWAY_URL='ftp://x'"):
        assert name in joined
    assert "default 0.75" in joined


def test_ratio_must_end_below_threshold():
    s, warnings = load_settings({"TENCENTDB_OFFLOAD_COMPACT_RATIO": "0.8", "TENCENTDB_OFFLOAD_THRESHOLD": "0.6"})
    assert s.compact_ratio < s.threshold
    assert any("must be below" in w for w in warnings)


def test_api_key_never_shown():
    s, warnings = load_settings({"TENCENTDB_OFFLOAD_API_KEY": "   "})
    assert warnings and "(hidden)" in warnings[0]
    s, _ = load_settings({"TENCENTDB_OFFLOAD_API_KEY": "sekret-123"})
    assert "sekret" not in repr(s) and "sekret" not in str(s.public())
    assert redact("abc") == "(set, 3 chars)"


def test_off_and_yaml_block():
    s, _ = load_settings({"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
    assert not s.gateway_enabled
    s, w = load_settings({}, {"threshold": 0.9, "compact_ratio": "0.4", "canvas": False})
    assert (s.threshold, s.compact_ratio, s.canvas) == (0.9, 0.4, False) and w == []
    s, _ = load_settings({"TENCENTDB_OFFLOAD_THRESHOLD": "0.8"}, {"threshold": 0.9})
    assert s.threshold == 0.8   # environment wins


def test_an_absolute_cap_wins_over_the_ratio_when_it_is_lower():
    from tencentdb_offload.settings.config import Settings
    s, warnings = load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "200000"})
    assert warnings == [] and s.max_context_tokens == 200_000
    # the cap scales the landing like the window would: cap × COMPACT_RATIO / THRESHOLD
    assert (s.trigger_tokens(1_000_000), s.target_tokens(1_000_000)) == (
        200_000, int(200_000 * s.compact_ratio / s.threshold))
    assert (s.trigger_tokens(128_000), s.target_tokens(128_000)) == (               # ratio lower
        int(128_000 * s.threshold), int(128_000 * s.compact_ratio))
    plain = Settings()
    assert (plain.trigger_tokens(1_000_000), plain.target_tokens(1_000_000)) == (
        int(1_000_000 * plain.threshold), int(1_000_000 * plain.compact_ratio))
    for bad in ("100", "-1", "lots", "1e9"):
        s, warnings = load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": bad})
        assert s.max_context_tokens == 0 and len(warnings) == 1, bad
    assert load_settings({"TENCENTDB_OFFLOAD_MAX_CONTEXT_TOKENS": "0"})[0].max_context_tokens == 0


def test_the_gateway_url_knows_whether_it_was_configured():
    import logging
    from tencentdb_offload.settings.config import announce_unconfigured_gateway, unconfigured_gateway_notice
    default, _ = load_settings({})
    assert not default.gateway_configured
    assert default.describe_gateway() == "Gateway at the default URL http://127.0.0.1:8420 (not configured)"
    assert "TENCENTDB_OFFLOAD_GATEWAY_URL=off" in unconfigured_gateway_notice(default)
    chosen, _ = load_settings({"TENCENTDB_OFFLOAD_GATEWAY_URL": "http://127.0.0.1:8420"})
    assert chosen.gateway_configured and chosen.describe_gateway() == "Gateway at http://127.0.0.1:8420"
    assert unconfigured_gateway_notice(chosen) == ""
    block, _ = load_settings({}, {"gateway_url": "http://10.0.0.2:8420"})
    assert block.gateway_configured
    assert load_settings({"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})[0].describe_gateway() == \
        "no Gateway (local compaction only)"
    seen = []

    class Log:
        def warning(self, fmt, *args):
            seen.append(fmt % args)
    other, _ = load_settings({}, {"instance_id": "x"})    # another Settings, same default URL
    assert announce_unconfigured_gateway(default, Log()) in (True, False)
    assert announce_unconfigured_gateway(other, Log()) is False          # once per process
    assert announce_unconfigured_gateway(chosen, Log()) is False
    assert len(seen) <= 1 and all("not configured" in line for line in seen)


def test_a_threshold_counts_as_set_only_when_it_was_read():
    assert not load_settings({})[0].threshold_explicit
    assert load_settings({"TENCENTDB_OFFLOAD_THRESHOLD": "0.75"})[0].threshold_explicit
    assert not load_settings({"TENCENTDB_OFFLOAD_THRESHOLD": "lots"})[0].threshold_explicit
    assert not load_settings({"TENCENTDB_OFFLOAD_THRESHOLD": "0.00001"})[0].threshold_explicit


def test_a_whole_number_setting_says_so_in_words():
    s, warnings = load_settings({"TENCENTDB_OFFLOAD_MAX_SESSIONS": "abc"})
    assert s.max_sessions == 20
    assert any("must be a whole number" in w for w in warnings)
    assert not any("invalid literal" in w for w in warnings)
