"""Credentials that are no credentials (blank, short) refused at start; a blank ``?token=``
opens nothing; a token whose name is percent-encoded (``?tok%65n=``) is kept out of the log as
``?token=`` is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from loopgate.gateway.identity.single_token import MIN_TOKEN_CHARS
from loopgate.gateway.settings import Settings, load_settings
from tests.gateway.harness import REPO, running_gateway
from tests.hostile.support import serve, ws_handshake
from tests.identity.principals import write_test_keys

SECRET = "hardening-t0ken-value-4c1e"


@pytest.mark.parametrize(
    ("env", "flags", "says"),
    [
        ({"LOOPGATE_TOKEN": " "}, {}, "not blank"),
        ({"LOOPGATE_TOKEN": ""}, {}, "not blank"),
        ({}, {"token": " "}, "not blank"),
        ({}, {"token": "two words here, long enough"}, "without spaces"),
        ({}, {"token": "x" * (MIN_TOKEN_CHARS - 1)}, f"at least {MIN_TOKEN_CHARS} characters"),
        ({"LOOPGATE_TOKEN": "s3cret"}, {}, f"at least {MIN_TOKEN_CHARS} characters"),
    ],
)
def test_blank_and_short_tokens_are_refused(
    env: dict[str, str], flags: dict[str, str], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        load_settings(env, flags)


def test_token_files_blank_or_short_are_refused(tmp_path: Path) -> None:
    blank, short = tmp_path / "blank", tmp_path / "short"
    blank.write_text("  \n\n")
    short.write_text("abc123\n")
    with pytest.raises(ValueError, match="must hold one token"):
        Settings(token_file=str(blank))
    with pytest.raises(ValueError, match=f"the token file must be at least {MIN_TOKEN_CHARS}"):
        load_settings({"LOOPGATE_TOKEN_FILE": str(short)})
    assert Settings(token="x" * MIN_TOKEN_CHARS).token == "x" * MIN_TOKEN_CHARS


def test_serve_refuses_a_blank_token_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopgate", "serve", "--token", " "],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "loopgate serve: invalid setting: the token (--token, LOOPGATE_TOKEN) must be one token "
        "without spaces, not blank\n"
    )


@pytest.mark.parametrize("kind", ["token", "keys"])
def test_a_blank_query_token_opens_nothing(kind: str, tmp_path: Path) -> None:
    settings = {"token": SECRET} if kind == "token" else {"keys_file": str(tmp_path / "keys.json")}
    if kind == "keys":
        write_test_keys(tmp_path / "keys.json")
    with running_gateway(**settings) as (base, server):
        port = server.config.port
        for query in ("?token=%20", "?token=", "?token=+", "?token=%00", "?tok%65n=%20"):
            events = httpx.get(f"{base}/v1/runs/run_x/events{query}", timeout=10)
            assert events.status_code == 401, (query, events.text)
            for path in ("/acp", "/rpc/ws", "/agui/ws"):
                sock, head = ws_handshake(port, path + query)
                sock.close()
                assert not head.startswith(b"HTTP/1.1 101"), (path, query, head)


def test_a_percent_encoded_token_name_works_and_never_reaches_the_log(tmp_path: Path) -> None:
    env = {"LOOPGATE_TOKEN": SECRET}
    with serve(tmp_path, env=env) as served:
        # The query's names are decoded: tok%65n is token, and it authenticates.
        sock, head = ws_handshake(served.port, f"/acp?tok%65n={SECRET}&client=t")
        sock.close()
        assert head.startswith(b"HTTP/1.1 101"), head
        sock, head = ws_handshake(served.port, f"/rpc/ws?%74%6F%6B%65%6E={SECRET}")
        sock.close()
        assert head.startswith(b"HTTP/1.1 101"), head
        run = httpx.post(
            f"{served.base}/v1/runs",
            json={"input": "hi"},
            headers={"authorization": f"Bearer {SECRET}"},
            timeout=10,
        ).json()
        streamed = httpx.get(
            f"{served.base}/v1/runs/{run['id']}/events?TOK%45N={SECRET}x&stream=false", timeout=10
        )
        assert streamed.status_code == 401  # TOKEN is not token, and is redacted all the same
        ok = httpx.get(f"{served.base}/v1/runs/{run['id']}/events?tok%65n={SECRET}", timeout=10)
        assert ok.status_code == 200
    log = served.log()
    assert "/acp?tok%65n=[redacted]&client=t" in log
    assert "/rpc/ws?%74%6F%6B%65%6E=[redacted]" in log
    assert "TOK%45N=[redacted]&stream=false" in log
    assert f"/v1/runs/{run['id']}/events?tok%65n=[redacted]" in log
    assert SECRET not in log
