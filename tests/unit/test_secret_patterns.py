"""The plugin's own secret patterns (``common/secret_patterns``, what masks outside Hermes and
after Hermes' redactor inside it): every common kind is masked, a masked text stays as it is,
and a realistic tool-heavy session's code, hashes, UUIDs and paths pass unchanged through
``strict`` (Hermes' redactor then ours under a Hermes venv; ours alone in the unit venv)."""

from __future__ import annotations

import json

import pytest

from tencentdb_offload.common import secret_patterns
from tencentdb_offload.context import redact
from tencentdb_offload.context.redact import Redactor, strict

from test_redact_boundary import PEM, SECRETS, leaked

KINDS = dict(SECRETS, **{
    "sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf": "ANTHROPIC: sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf",
    "xoxb-2048-Qw9Er8Ty7Ui6Op5": "slack bot xoxb-2048-Qw9Er8Ty7Ui6Op5",
    "AIzaSyQ1w2E3r4T5y6U7i8O9p0AaSsDdFfGgHh": "maps key AIzaSyQ1w2E3r4T5y6U7i8O9p0AaSsDdFfGgHh",
    "hunter2hunter2": '{"user": "dev", "password": "hunter2hunter2"}',
    "glpat-Zq9Xw8Cv7Bn6Mm5Ll4": "GITLAB=glpat-Zq9Xw8Cv7Bn6Mm5Ll4",
})
CORPUS = [
    # code
    '''class Client:
    def __init__(self, api_key: str, timeout: float = 30.0) -> None:
        self._api_key_ref = weakref.ref(api_key)
        self._password_hash = hashlib.sha256(b"").hexdigest()

    def login(self, username, password):
        if not password:
            raise ValueError("password required")
        token = self._auth.exchange(username, password)
        return token
''',
    'api_key = os.environ["OPENAI_API_KEY"]\nkey = os.getenv("ANTHROPIC_API_KEY")\nmax_tokens = 4096\n',
    'const token = process.env.GITHUB_TOKEN;\nexport function getToken(): string { return token; }\n',
    'for key, value in sorted(items.items()):\n    cache_key = f"{prefix}:{key}"\n',
    # hashes, ids
    'commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: Dev <dev@example.com>\nDate:   Mon Dec 7 03:05:00 2026\n\n    Fix the parser (closes #812)\n',
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  dist/app.tar.gz\nd41d8cd98f00b204e9800998ecf8427e  README.md\n',
    '"integrity": "sha512-Vl5hqZ2Ta5N1oD8j9wJ6dQ9x1y6oG3yqFu8cX9M0yQm3vJ1L0pT7s5qWnYzKkA7c2bVb3q3NfT8e6p1kXQ=="',
    'image: registry.example.com/app@sha256:9b2a3f0c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a',
    'request 123e4567-e89b-12d3-a456-426614174000 done; trace 6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b\n',
    # paths
    '/home/dev/.aws/credentials\n/home/dev/.ssh/id_rsa\n~/.config/gcloud/application_default_credentials.json\nC:\\Users\\dev\\secrets\\notes.txt\n',
    'src/auth/token_store.py:42: def rotate_token(self, key_id: str) -> None:\n',
    # tool output
    '$ ls -la\ntotal 24\ndrwxr-xr-x  5 dev dev 4096 Dec  7 03:05 .\n-rw-r--r--  1 dev dev  220 Dec  7 03:05 .env.example\n',
    'PASSED tests/test_auth.py::test_login_with_wrong_password\nFAILED tests/test_auth.py::test_token_refresh - AssertionError\n',
    'GET https://api.example.com/v1/users?page=2&per_page=50 200 OK\nhttps://github.com/NousResearch/hermes-agent/pull/1234\n',
    '{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "model": "claude", "usage": {"input_tokens": 12, "output_tokens": 40}}',
    'diff --git a/app/settings.py b/app/settings.py\n@@ -1,3 +1,3 @@\n-TIMEOUT = 30\n+TIMEOUT = 60\n',
    'The tokenizer splits "password" into two tokens; the keyboard shortcut is Ctrl+K.',
]


@pytest.mark.parametrize("secret", sorted(KINDS))
def test_each_kind_is_masked_by_our_patterns_and_by_strict(secret):
    text = "before\n" + KINDS[secret] + "\nafter"
    for mask in (secret_patterns.redact, strict):
        out = mask(text)
        assert secret not in out and out.startswith("before\n") and out.endswith("\nafter"), out
        assert secret not in mask(out)
    out = secret_patterns.redact(text)      # ours masks once: again changes nothing (Hermes'
    assert secret_patterns.redact(out) == out   # may mask its own mask further: never less)


def test_a_key_block_cut_before_its_end_is_masked():
    cut = "key file:\n" + PEM[:60]
    assert "MIIEow" not in strict(cut) and strict(cut).startswith("key file:")


@pytest.mark.parametrize("n", range(len(CORPUS)))
def test_code_hashes_uuids_and_paths_pass_unchanged(n):
    assert strict(CORPUS[n]) == CORPUS[n]
    assert secret_patterns.redact(CORPUS[n]) == CORPUS[n]


def test_a_body_keeps_its_ids_and_object_arguments():
    body = {"session_id": "hermes-sk-proj-Qm4v8XcT2bN7rL9pW3sK6yH1jF5dA0gZ", "tool_pairs": [{
        "tool_call_id": "call_1", "tool_name": "terminal",
        "params": {"command": "deploy", "env": {"API_TOKEN": "Zz9Yy8Xx7Ww6Vv5Uu4"}},
        "result": KINDS["xoxb-2048-Qw9Er8Ty7Ui6Op5"]}]}
    out, n = Redactor().value(body)
    assert n == 2 and out["session_id"] == body["session_id"]      # ids are never masked
    pair = out["tool_pairs"][0]
    assert pair["params"]["command"] == "deploy" and "Zz9Yy8Xx7Ww6Vv5Uu4" not in str(pair)
    assert leaked(str(pair)) == [] and body["tool_pairs"][0]["params"]["env"]["API_TOKEN"] == "Zz9Yy8Xx7Ww6Vv5Uu4"
    assert Redactor(enabled=False).value(body) == (body, 0)


def test_the_source_is_named():
    assert redact.source().startswith("Hermes'") == (redact._HOST is not None)


def test_a_long_text_sent_again_is_masked_once_and_the_memo_is_bounded():
    calls = []

    def mask(text):
        calls.append(text)
        return strict(text)
    Redactor(mask=mask).text("x" * 2000 + KINDS["hunter2hunter2"])     # (ingest: never kept)
    assert len(calls) == 1
    calls.clear()
    r = Redactor(mask=mask).remembering()
    r.MEMO_CHARS = 3 * 1000
    texts = ["%d %s" % (i, KINDS["hunter2hunter2"]) + " pad" * 250 for i in range(5)]
    assert [r.text(t)[1] for t in texts[:2] * 2] == [1, 1, 1, 1]
    assert len(calls) == 2                  # the second round came from the memo
    for t in texts:
        r.text(t)
    assert r._memo_chars <= r.MEMO_CHARS and texts[0] not in r._memo


def test_a_json_result_is_masked_string_by_string_and_stays_json():
    """Hermes' ``terminal`` answers ``{"output": "…", "exit_code": 0}``: its line breaks are
    escapes, which joined every line into one value (and left a key block whole)."""
    from test_redact_boundary import ENV_DUMP
    text = json.dumps({"output": ENV_DUMP, "exit_code": 0, "env": {"password": "plain-pw-42"}})
    out = strict(text)
    assert leaked(out) == [] and "plain-pw-42" not in out
    data = json.loads(out)
    assert data["exit_code"] == 0 and data["output"].splitlines()[:2] == ["HOME=/home/dev", "PATH=/usr/bin:/bin"]
    assert strict(json.dumps({"path": "/src/f.py", "sha": "e3b0c44298fc1c14"})) == \
        json.dumps({"path": "/src/f.py", "sha": "e3b0c44298fc1c14"})      # unchanged: not re-encoded


def test_a_cut_json_text_with_escaped_line_breaks_is_masked_line_by_line():
    from test_redact_boundary import ENV_DUMP
    cut = json.dumps({"output": ENV_DUMP})[:-40]          # no longer JSON: read as text
    out = strict(cut)
    assert leaked(out) == [] and "\n" not in out and out.startswith('{"output": "HOME=/home/dev\\nPATH=')
    plain = json.dumps({"path": "/src/f.py", "lines": "a\nb\nc"})[:-3]
    assert strict(plain) == plain
