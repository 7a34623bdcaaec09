"""The Host allowlist against DNS rebinding (issue 13, item 6) and secrets kept out of logs and
`ps` (item 7), against real `loopgate serve` children."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from loopgate.gateway.auth import HostGuard
from loopgate.gateway.redaction import RedactSecrets, redact
from loopgate.gateway.settings import load_settings
from tests.gateway.harness import REPO
from tests.hostile.support import serve, ws_frame, ws_handshake

SECRET = "s3cr3t-t0ken-value"


def raw_get(port: int, host: str, path: str = "/v1/runs") -> tuple[int, bytes]:
    """A GET with exactly this Host header (clients derive it from the URL otherwise)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_foreign_host_gets_421_on_http_and_on_websocket_upgrades(tmp_path: Path) -> None:
    with serve(tmp_path, "--allowed-host", "gw.example") as served:
        port = served.port
        status, body = raw_get(port, "attacker.example")
        assert status == 421
        problem = json.loads(body)
        assert problem["title"] == "Misdirected Request" and "--allowed-host" in problem["detail"]
        assert raw_get(port, f"attacker.example:{port}")[0] == 421
        # A name that resolves to 127.0.0.1 is still not loopback.
        assert raw_get(port, f"127.0.0.1.nip.io:{port}")[0] == 421
        for host in (
            "localhost",
            f"localhost:{port}",
            "127.0.0.1",
            f"127.0.0.1:{port}",
            f"[::1]:{port}",
            "LOCALHOST.",
            "gw.example",
            f"gw.example:{port}",
        ):
            assert raw_get(port, host)[0] == 200, host
        for path in ("/acp", "/rpc/ws", "/agui/ws"):
            sock, head = ws_handshake(port, path, host="attacker.example")
            sock.close()
            assert head.startswith(b"HTTP/1.1 421"), (path, head)
        sock, head = ws_handshake(port, "/acp", host=f"localhost:{port}")
        assert head.startswith(b"HTTP/1.1 101")
        sock.close()


def test_with_a_token_the_allowlist_is_off_unless_hosts_are_given(tmp_path: Path) -> None:
    env = {"LOOPGATE_TOKEN": SECRET}
    auth = f"Authorization: Bearer {SECRET}"
    # A gateway on the network is reached by whatever name its users have for it.
    with (
        serve(tmp_path, env=env) as served,
        socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock,
    ):
        sock.sendall(
            f"GET /v1/runs HTTP/1.1\r\nHost: gw.internal\r\n{auth}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        assert sock.recv(64).startswith(b"HTTP/1.1 200")
    with serve(tmp_path, "--allowed-host", "gw.internal", env=env) as served:
        assert raw_get(served.port, "other.internal")[0] == 421


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("localhost", True),
        ("localhost:8000", True),
        ("127.0.0.1:1", True),
        ("127.9.9.9", True),
        ("[::1]", True),
        ("[::1]:8000", True),
        ("[::1]x", False),
        ("::1", False),
        ("localhost:80x", False),
        ("", False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("proxy.example", True),
        ("proxy.example:9", True),
        ("pinned.example:8443", True),
        ("pinned.example:8444", False),
    ],
)
def test_host_names_the_guard_accepts(host: str, allowed: bool) -> None:
    guard = HostGuard(None, ["proxy.example", "pinned.example:8443"])  # type: ignore[arg-type]
    assert guard.host_allowed(host) is allowed


def test_a_token_in_a_websocket_url_never_reaches_the_log(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(SECRET + "\n")
    with serve(tmp_path, "--token-file", str(token_file)) as served:
        # Not in the process's command line either.
        assert SECRET not in Path(f"/proc/{served.proc.pid}/cmdline").read_text()
        sock, head = ws_handshake(served.port, f"/acp?token={SECRET}&client=test")
        assert head.startswith(b"HTTP/1.1 101"), head
        sock.sendall(
            ws_frame(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"protocolVersion": 1},
                    }
                )
            )
        )
        assert b'"protocolVersion"' in sock.recv(65536)
        sock.close()
        # Wrong token in a URL, and a plain request carrying one in its query: logged, redacted.
        bad, head = ws_handshake(served.port, f"/rpc/ws?token={SECRET}x")
        bad.close()
        assert head.startswith(b"HTTP/1.1 403")
        assert httpx.get(f"{served.base}/v1/runs?token={SECRET}").status_code == 401
    log = served.log()
    assert '"WebSocket /acp?token=[redacted]&client=test" [accepted]' in log
    assert "/v1/runs?token=[redacted]" in log
    assert SECRET not in log


def test_the_filter_redacts_arguments_messages_and_tracebacks() -> None:
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "%s %r %d", None, None)
    record.args = (f"/acp?token={SECRET}", httpx.URL(f"http://h/?a=1&token={SECRET}"), 7)
    try:
        raise ValueError(f"bad url ws://h/?token={SECRET}")
    except ValueError:
        record.exc_info = sys.exc_info()
    assert RedactSecrets().filter(record)
    formatted = logging.Formatter().format(record)
    assert SECRET not in formatted
    assert formatted.count("token=[redacted]") >= 3  # the source line quoted too
    assert redact("token=[redacted]&x") == "token=[redacted]&x"
    assert redact(f"access_token={SECRET} more") == "access_token=[redacted] more"


def test_token_sources_and_help(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {SECRET}\n")
    assert load_settings({}, {"token_file": str(token_file)}).token == SECRET
    assert load_settings({"LOOPGATE_TOKEN": SECRET}).token == SECRET
    # A flag, in either form, replaces the environment's token.
    assert load_settings({"LOOPGATE_TOKEN": "env"}, {"token_file": str(token_file)}).token == SECRET
    with pytest.raises(ValueError, match="not both"):
        load_settings({}, {"token": "a", "token_file": str(token_file)})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="must hold one token"):
        load_settings({}, {"token_file": str(tmp_path / "empty")})
    with pytest.raises(ValueError, match="cannot read the token file"):
        load_settings({}, {"token_file": str(tmp_path / "missing")})
    usage = subprocess.run(
        [sys.executable, "-m", "loopgate", "serve", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--token-file" in usage and "`ps`" in usage and "LOOPGATE_TOKEN" in usage
