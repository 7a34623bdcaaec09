"""``--journal rediss://…``: the journal over TLS, against a redis-server listening with TLS
only, its certificate signed by a CA made here (the URL names the CA file, as a deployment
with a private CA does)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopgate.contracts.envelope import LoopEvent
from loopgate.contracts.ports import StartRun
from loopgate.gateway.app import build_hub
from loopgate.gateway.settings import Settings
from tests.fakes.redis_server import RedisProcess

pytestmark = pytest.mark.anyio


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(where: Path) -> None:
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
            "-subj", "/CN=loopgate test CA", cwd=where)  # fmt: skip
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=127.0.0.1", cwd=where)  # fmt: skip
    (where / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "1", "-extfile", "san.cnf",
            cwd=where)  # fmt: skip


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[str]:
    make_certificates(tmp_path)
    with RedisProcess(
        "--tls-cert-file", "server.pem", "--tls-key-file", "server.key",
        "--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no",
        "--save", "", "--appendonly", "no",
        cwd=tmp_path, plain=False,
    ) as server:  # fmt: skip
        yield f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={tmp_path / 'ca.pem'}"


async def test_runs_are_shared_over_tls(tls_redis: str) -> None:
    settings = Settings(journal=tls_redis, scripted_delay_s=0.0)
    async with build_hub(settings) as a, build_hub(settings) as b:
        run_id = (await a.start(StartRun(source="ingest"))).id
        await a.push(run_id, LoopEvent("content_delta", {"delta": "over TLS"}))
        history = await b.history(run_id)
        assert [e.data for e in history] == [{"delta": "over TLS"}]
