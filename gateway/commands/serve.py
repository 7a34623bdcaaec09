"""``loopgate serve``: the gateway server."""

from __future__ import annotations

import argparse
import errno
import gc
import os
import socket
import sys
from typing import Any

from ..config_file import settings_for_command
from ..journal import check_journal
from .flags import (
    LOOP_SETTINGS,
    add_config_flag,
    add_log_level,
    add_loop_flags,
)

ENDPOINTS = """endpoints (docs/api.md):
  GET  /                              the web console (docs/console.md)
  GET  /healthz                       liveness
  GET  /readyz                        readiness (503 while it stops, or its journal cannot commit)
  GET  /openapi.json, GET /docs       this API's OpenAPI 3.1 description, and a page for it
  GET  /v1/contract                   the event kinds and payloads this gateway speaks
  GET  /v1/agents                     the agents runs may be started on (docs/agents.md)
  GET  /v1/loop                       the default agent's loop (and model)
  GET  /v1/me                         who the gateway takes you to be (subject, tenant, scopes)
  POST /v1/runs                       start a run (the loop, an ingest run, or a replay)
  GET  /v1/runs                       list runs
  GET  /v1/runs/{id}                  one run
  GET  /v1/runs/{id}/events           its events as SSE, resumable with Last-Event-ID
  POST /v1/runs/{id}/cancel           cancel it
  POST /v1/runs/{id}/steer            steer it
  POST /v1/runs/{id}/respond          answer its permission request
  POST /v1/runs/{id}/events           push an external loop's events (NDJSON)
  WS   /v1/runs/{id}/ingest           the same over a WebSocket
  POST /v1/threads                    record a thread (an ACP session) before its first run
  GET  /v1/threads                    list recorded threads
  GET  /v1/threads/{thread_id}        one recorded thread
  DELETE /v1/threads/{thread_id}      forget a recorded thread (its runs stay)
  POST /agui, WS /agui/ws             AG-UI (docs/agui.md)
  POST /agents/{name}/agui, WS /agents/{name}/agui/ws   AG-UI, the agent of that name
  WS   /acp, WS /agents/{name}/acp      ACP (Agent Client Protocol); the second for one agent
  POST /rpc, WS /rpc/ws               JSON-RPC 2.0
  POST /v1/chat/completions           OpenAI chat completions (docs/openai.md)
  GET  /v1/models, GET /v1/models/{model:path}   the model names it answers to
  POST /vercel, GET /vercel/{chat_id}/stream   Vercel AI SDK useChat (docs/vercel.md)
  POST /agents/{name}/vercel, GET /agents/{name}/vercel/{chat_id}/stream   the same, one agent
  POST /mcp                           MCP, streamable HTTP: runs as tools (docs/mcp.md)
  GET  /.well-known/agent-card.json   A2A: the default agent's Agent Card (docs/a2a.md)
  POST /a2a                           A2A's JSON-RPC binding
  POST /a2a/rest/message:send, POST /a2a/rest/message:stream   A2A's HTTP+JSON binding:
  GET /a2a/rest/tasks, GET /a2a/rest/tasks/{task_id}, POST /a2a/rest/tasks/{task_id}:cancel,
  GET /a2a/rest/tasks/{task_id}:subscribe, POST /a2a/rest/tasks/{task_id}:subscribe,
  POST /a2a/rest/tasks/{task_id}/pushNotificationConfigs,
  GET /a2a/rest/tasks/{task_id}/pushNotificationConfigs,
  GET /a2a/rest/tasks/{task_id}/pushNotificationConfigs/{config},
  DELETE /a2a/rest/tasks/{task_id}/pushNotificationConfigs/{config}
  the same under /agents/{name}: GET /agents/{name}/.well-known/agent-card.json,
  POST /agents/{name}/a2a, POST /agents/{name}/a2a/rest/message:send,
  POST /agents/{name}/a2a/rest/message:stream, GET /agents/{name}/a2a/rest/tasks,
  GET /agents/{name}/a2a/rest/tasks/{task_id}, POST /agents/{name}/a2a/rest/tasks/{task_id}:cancel,
  GET /agents/{name}/a2a/rest/tasks/{task_id}:subscribe,
  POST /agents/{name}/a2a/rest/tasks/{task_id}:subscribe,
  POST /agents/{name}/a2a/rest/tasks/{task_id}/pushNotificationConfigs,
  GET /agents/{name}/a2a/rest/tasks/{task_id}/pushNotificationConfigs,
  GET /agents/{name}/a2a/rest/tasks/{task_id}/pushNotificationConfigs/{config},
  DELETE /agents/{name}/a2a/rest/tasks/{task_id}/pushNotificationConfigs/{config}"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "serve",
        help="run the gateway server",
        description="Run the gateway server. Every flag also reads LOOPGATE_<NAME> "
        "(e.g. LOOPGATE_PORT); flags win.",
        epilog=ENDPOINTS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_setting_flags(p)
    add_log_level(p, "info")
    p.set_defaults(func=main)


def add_setting_flags(p: argparse.ArgumentParser) -> None:
    """The flags that set Settings fields (SETTING_FLAGS), with -c: serve's, and config show's
    (which shows what serve would run with)."""
    add_config_flag(p)
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    secret = p.add_mutually_exclusive_group()
    secret.add_argument(
        "--token",
        help="bearer token every endpoint requires (required off-loopback). Visible to every "
        "user of this machine in `ps`: prefer --token-file or LOOPGATE_TOKEN",
    )
    secret.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the bearer token from this file (or set LOOPGATE_TOKEN)",
    )
    p.add_argument(
        "--keys-file",
        metavar="PATH",
        help="API keys, each with its own principal (or set LOOPGATE_KEYS_FILE; made with "
        "`loopgate keys add`, re-read when it changes; docs/auth.md)",
    )
    p.add_argument(
        "--audit-log",
        metavar="DEST",
        help="where the audit log's JSON lines go: stderr, off, or a file (default: stderr "
        "once a credential is configured, else off; or set LOOPGATE_AUDIT_LOG; docs/auth.md)",
    )
    p.add_argument(
        "--allowed-origin",
        dest="allowed_origins",
        action="append",
        help="an Origin whose pages may call the API (CORS, POST) and open WebSockets "
        "(repeatable; replaces the default: loopback origins on any port)",
    )
    p.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        metavar="NAME[:PORT]",
        help="a Host name served besides loopback ones, e.g. a proxy's (repeatable; '*' for "
        "any). Without a token, other names get 421 (DNS rebinding)",
    )
    p.add_argument(
        "--jwks-url",
        metavar="URL",
        help="take OIDC/JWT bearer tokens signed by the keys published at this https URL "
        "(docs/auth.md); needs --jwt-issuer and --jwt-audience",
    )
    p.add_argument(
        "--jwks-file",
        metavar="PATH",
        help="take OIDC/JWT bearer tokens signed by the keys in this JWKS file",
    )
    p.add_argument("--jwt-issuer", metavar="ISS", help="the issuer (iss) a token must name")
    p.add_argument(
        "--jwt-audience", metavar="AUD", help="the audience (aud) a token must name: this gateway"
    )
    p.add_argument(
        "--trusted-proxy",
        dest="trusted_proxies",
        action="append",
        metavar="IP[/BITS]",
        help="a front proxy (address or network) whose --proxy-user-header names the user "
        "(repeatable; docs/auth.md). The header from any other address is refused",
    )
    p.add_argument(
        "--proxy-user-header",
        metavar="NAME",
        help="the header a trusted proxy names the user in (default x-forwarded-user)",
    )
    p.add_argument(
        "--allowed-outbound",
        dest="allowed_outbound",
        action="append",
        metavar="URL-PREFIX|HOST[:PORT]",
        help="a URL prefix or host[:port] that clients on the network may have the gateway "
        "contact, e.g. the http MCP servers of ACP sessions (repeatable; default none)",
    )
    p.add_argument(
        "--header-timeout",
        dest="header_timeout_s",
        type=float,
        metavar="SECONDS",
        help="close a connection whose request head has not arrived in this time (default 15)",
    )
    p.add_argument(
        "--body-timeout",
        dest="body_timeout_s",
        type=float,
        metavar="SECONDS",
        help="answer 408 to a request whose body has not arrived whole in this time (default "
        "30; a streamed ingest body has no total bound)",
    )
    p.add_argument(
        "--body-idle-timeout",
        dest="body_idle_timeout_s",
        type=float,
        metavar="SECONDS",
        help="answer 408 to a request body that sends no byte for this long (default 10)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        help="open connections at most; new ones beyond are answered 503 (default 1000)",
    )
    p.add_argument(
        "--write-timeout",
        dest="write_timeout_s",
        type=float,
        metavar="SECONDS",
        help="cut off a client that accepts no bytes for this long (default 30)",
    )
    p.add_argument(
        "--max-queued-runs",
        dest="max_queued_runs",
        type=int,
        metavar="N",
        help="loop runs past max_active_runs wait, queued, for room to run; 429 once N wait "
        "(default 1000; 0: no queue)",
    )
    p.add_argument(
        "--thread-wait",
        dest="thread_wait_s",
        type=float,
        metavar="SECONDS",
        help="how long a start with a multitask_strategy waits for its thread's turn before "
        "it is refused 409 (default 60)",
    )
    p.add_argument(
        "--ws-compression",
        dest="ws_compression",
        action="store_true",
        default=None,
        help="compress WebSocket messages when the client offers it (permessage-deflate): "
        "less traffic, about 35 KiB more memory per connection (default off)",
    )
    p.add_argument(
        "--no-console",
        dest="console",
        action="store_false",
        default=None,
        help="serve no web console at / (docs/console.md)",
    )
    p.add_argument(
        "--reload",
        action="store_true",
        default=None,
        help="development: build the agents again when the config file or a loop module, "
        "tools module or system prompt file they use changes; finished runs stay",
    )
    add_loop_flags(p)
    p.add_argument(
        "--acp-remote-stdio-mcp",
        dest="acp_remote_stdio_mcp",
        action="store_true",
        default=None,
        help="let ACP clients on /acp have the gateway start the stdio MCP servers they name "
        "(off: only http MCP servers)",
    )
    p.add_argument(
        "--journal",
        help="'memory' (default), 'sqlite:PATH', 'redis://HOST:PORT/DB', "
        "'redis+sentinel://HOST:PORT/SERVICE' or 'postgresql://USER@HOST:PORT/DB' "
        "(docs/scale.md)",
    )
    p.add_argument(
        "--bus",
        help="with --journal postgresql://: the Redis (redis://HOST:PORT/DB) through which "
        "several instances share it (docs/scale.md)",
    )
    p.add_argument(
        "--role",
        choices=("all", "api", "worker"),
        help="all (default): accept runs and run them; api: accept runs into the shared queue "
        "and run none; worker: run queued runs (docs/scale.md; needs --journal redis://)",
    )
    p.add_argument("--workspace", help="directory the demo file tools may read and write")
    p.add_argument(
        "--keepalive",
        dest="keepalive_s",
        type=float,
        help="seconds between keep-alive comments on quiet streams (default 15)",
    )
    p.add_argument(
        "--delivery-window",
        dest="delivery_window_s",
        type=float,
        metavar="SECONDS",
        help="live events reach subscribers together once per window (default 0.002; 0: each)",
    )
    p.add_argument(
        "--max-active-runs",
        type=int,
        metavar="N",
        help="runs going at once; more are answered 429 (default 1000)",
    )
    p.add_argument(
        "--max-subscribers-per-run",
        type=int,
        metavar="N",
        help="clients watching one run; more are answered 429 (default 256)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        metavar="BYTES",
        help="largest request body; bigger is answered 413 (default 1048576)",
    )
    quota = p.add_argument_group(
        "quotas",
        "per principal (an API key's own limits win; docs/auth.md#quotas); 0: no limit "
        "(the default). Per tenant: LOOPGATE_TENANT_QUOTA_*",
    )
    quota.add_argument(
        "--quota-concurrent-runs",
        type=int,
        metavar="N",
        help="runs one principal may have going at once; more are answered 429",
    )
    quota.add_argument(
        "--quota-runs-per-minute",
        type=int,
        metavar="N",
        help="runs one principal may start in any minute",
    )
    quota.add_argument(
        "--quota-events-per-day",
        type=int,
        metavar="N",
        help="events one principal's runs may produce a UTC day (checked when a run starts)",
    )
    quota.add_argument(
        "--quota-tokens-per-day",
        type=int,
        metavar="N",
        help="model tokens one principal's runs may use a UTC day (checked when a run starts)",
    )
    p.add_argument(
        "--otel-endpoint",
        help="OTLP/HTTP base URL to send traces to, e.g. http://127.0.0.1:4318 "
        "(default: OTEL_EXPORTER_OTLP_ENDPOINT; none = no export)",
    )
    p.add_argument("--otel-service-name", help="service.name of the traces (default loopgate)")
    p.add_argument(
        "--otel-export-timeout",
        dest="otel_export_timeout_s",
        type=float,
        help="seconds one trace export may take (default 5)",
    )
    p.add_argument(
        "--trace-console",
        action="store_true",
        default=None,
        help="print every finished span to stderr (local debugging)",
    )
    p.add_argument(
        "--trace-content",
        action="store_true",
        default=None,
        help="record message content (text, tool arguments and results) on spans",
    )


SETTING_FLAGS = (
    *LOOP_SETTINGS,
    "host",
    "port",
    "token",
    "token_file",
    "keys_file",
    "audit_log",
    "allowed_origins",
    "allowed_hosts",
    "jwks_url",
    "jwks_file",
    "jwt_issuer",
    "jwt_audience",
    "trusted_proxies",
    "proxy_user_header",
    "allowed_outbound",
    "header_timeout_s",
    "body_timeout_s",
    "body_idle_timeout_s",
    "max_connections",
    "console",
    "reload",
    "write_timeout_s",
    "thread_wait_s",
    "max_queued_runs",
    "ws_compression",
    "acp_remote_stdio_mcp",
    "journal",
    "bus",
    "role",
    "workspace",
    "keepalive_s",
    "delivery_window_s",
    "max_active_runs",
    "max_subscribers_per_run",
    "max_body_bytes",
    "quota_concurrent_runs",
    "quota_runs_per_minute",
    "quota_events_per_day",
    "quota_tokens_per_day",
    "otel_endpoint",
    "otel_service_name",
    "otel_export_timeout_s",
    "trace_console",
    "trace_content",
)


def setting_flags(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in SETTING_FLAGS}


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """Why the gateway cannot listen on ``host:port``, and the flag that changes it."""
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use (another loopgate, or another server): "
            "stop it, or choose another port with --port"
        )
    if exc.errno == errno.EACCES:
        return f"no permission to listen on port {port} (below 1024 needs root): use --port"
    if isinstance(exc, socket.gaierror):
        return f"cannot listen on --host {host}: no such host name"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on --host {host}: not an address of this machine"
    return f"cannot listen on {host}:{port}: {(exc.strerror or type(exc).__name__).lower()}"


def freeze_startup_heap() -> None:
    """Move everything alive now out of the cyclic collector's sight (``gc.freeze()``).

    Called once the server is built, before it serves: every module, the app, the hub and
    the adapters exist, about 120,000 objects that live as long as the process. A full
    collection scans every tracked object, so it took 60–120 ms for them alone, however
    little the runs held; frozen, a full collection with 1,000 finished runs retained takes
    2–9 ms (docs/reliability.md). What it costs: a frozen object that later becomes part of
    cyclic garbage is never collected (one freed by its reference count still is); the
    collection before it makes sure nothing already garbage is frozen.
    """
    gc.collect()
    gc.freeze()


def main(args: argparse.Namespace) -> int:
    from ..server import bind, make_server

    try:
        # getattr: a Namespace built by a caller (tests) may predate -c.
        config = getattr(args, "config", None)
        settings = settings_for_command(config, os.environ, setting_flags(args))
        check_journal(settings.journal, settings.bus)
        server = make_server(settings, log_level=args.log_level)
        if settings.reload:
            from ..agents.reload import reload_on_change

            app: Any = server.config.app
            reload_on_change(app, settings, config=config, flags=setting_flags(args))
    except ValueError as exc:
        # A config file's problems: one line each, all of them, so one edit can fix them all.
        for problem in str(exc).splitlines():
            print(f"loopgate serve: {problem}", file=sys.stderr)
        return 2
    try:
        # Bound here, before uvicorn starts anything: a port in use is one line, not a log
        # that reads "startup complete" and then an error.
        sockets = bind(settings.host, settings.port, server.config.backlog)
    except OSError as exc:
        problem = cannot_listen(settings.host, settings.port, exc)
        print(f"loopgate serve: {problem}", file=sys.stderr)
        return 2
    freeze_startup_heap()
    server.run(sockets=sockets)
    # A stop by signal exits as a process the signal ended would report it (130 for Ctrl-C).
    return 128 + server.stopped_by if server.stopped_by else 0
