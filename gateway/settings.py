"""Every knob of the gateway, from defaults, ``LOOPGATE_*`` environment variables and flags.

Every size, count and time the server handles is bounded by one of these fields.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..contracts.agents import check_agent_name
from ..contracts.outbound import check_outbound_entry
from ..contracts.parts import parse_kinds
from .agents.spec import AgentSpec
from .identity.single_token import check_token
from .settings_identity import (
    PROXY_HEADERS,
    check_header_name,
    check_jwt_settings,
    is_loopback,
    proxy_network,
)
from .settings_journal import check_journal_settings

ENV_PREFIX = "LOOPGATE_"
# The recorded streams {"replay": NAME} serves: package data (conformance/streams in a checkout).
# An editable install that maps the folders (no symlinks: setup.py) imports this file from the
# checkout's gateway/, beside conformance/ rather than inside loopgate/.
_HERE = Path(__file__).parent.parent
RECORDINGS = next(
    (p for p in (_HERE / "recordings", _HERE / "conformance" / "streams") if p.is_dir()),
    _HERE / "recordings",
)
# Where a --loop's generators run (gateway/plugs/python.py).
LoopRunner = Literal["event_loop", "thread"]


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"  # address to listen on
    port: int = 8000  # port to listen on
    # Required when listening beyond loopback; checked as a bearer token on every endpoint.
    token: str | None = None
    token_file: str | None = None  # the token read from a file (not visible in `ps`)
    # API keys, hashed, each with its principal (docs/auth.md; `loopgate keys`).
    keys_file: str | None = None
    # Where the audit log's JSON lines go: "stderr", "off", or a file (appended to); "auto":
    # stderr once any credential is configured, off for the one-user development default.
    audit_log: str = "auto"
    # OIDC/JWT bearer tokens (docs/auth.md), verified with the identity provider's public keys
    # from jwks_url (https, or http to loopback) or jwks_file; issuer and audience must match.
    jwks_url: str | None = None  # the identity provider's keys (JWKS)
    jwks_file: str | None = None  # the same keys, from a file
    jwt_issuer: str | None = None  # the issuer (iss) a token must name
    jwt_audience: str | None = None  # the audience (aud) a token must name
    jwt_leeway_s: float = 30.0  # clock skew allowed on exp, nbf and iat (0: none)
    jwt_tenant_claim: str = "tenant"  # absent from a token: the tenant "default"
    jwt_scopes_claim: str | None = None  # unset: scope, scp and roles
    jwks_timeout_s: float = 5.0  # one fetch of the JWKS, whole
    jwks_refresh_s: float = 300.0  # keys fetched again this often (and for an unknown kid)
    # Origins whose pages may call the API (CORS, POST) and open WebSockets; none: loopback
    # origins, on any port.
    allowed_origins: list[str] = msgspec.field(default_factory=list)
    # Host header names (or name:port) accepted besides loopback ones (DNS rebinding guard).
    allowed_hosts: list[str] = msgspec.field(default_factory=list)
    # A trusted front proxy (docs/auth.md): requests from these addresses (IPs or CIDRs) may
    # name their user in proxy_user_header; the same header from any other address is refused.
    trusted_proxies: list[str] = msgspec.field(default_factory=list)
    proxy_user_header: str = "x-forwarded-user"  # names the user
    proxy_email_header: str = "x-forwarded-email"  # the user's email
    proxy_tenant_header: str | None = None  # none: every proxied user is of tenant "default"
    proxy_groups_header: str | None = None  # e.g. "x-forwarded-groups", comma separated
    proxy_admin_groups: list[str] = msgspec.field(default_factory=list)  # these give admin
    # Where network clients may have the gateway send requests (the http MCP servers an ACP
    # client names, A2A push notifications, runs' webhooks): URL prefixes or host[:port]
    # patterns; none by default (docs/auth.md).
    allowed_outbound: list[str] = msgspec.field(default_factory=list)
    # Hostile connections (docs/reliability.md): a request head must arrive within this, its
    # body within body_timeout_s with no gap over body_idle_timeout_s (else 408); past
    # max_connections open sockets, new ones are answered 503 (health checks are still served).
    header_timeout_s: float = 15.0  # a request head, whole
    body_timeout_s: float = 30.0  # a request body, whole
    body_idle_timeout_s: float = 10.0  # a gap in a body
    max_connections: int = 1_000  # open sockets
    console: bool = True  # the web console at / (docs/console.md)
    # Development: the agents are built again when their config file, Python loop or tools
    # module or system prompt file changes; finished runs stay (docs/config.md#reloading).
    reload: bool = False

    # Quotas (docs/auth.md#quotas): per principal (subject and tenant; an API key's own limits
    # win) and per tenant, across instances when the journal is Redis. 0: no limit.
    quota_concurrent_runs: int = 0  # runs going at once
    quota_runs_per_minute: int = 0  # runs started in any minute
    quota_events_per_day: int = 0  # events a UTC day
    quota_tokens_per_day: int = 0  # model tokens a UTC day
    tenant_quota_concurrent_runs: int = 0  # the same, per tenant
    tenant_quota_runs_per_minute: int = 0  # the same, per tenant
    tenant_quota_events_per_day: int = 0  # the same, per tenant
    tenant_quota_tokens_per_day: int = 0  # the same, per tenant

    provider: Literal["scripted", "openai"] = "scripted"  # the model; openai when a server is named
    scripted_delay_s: float = 0.02  # between the scripted model's deltas
    openai_base_url: str | None = None  # e.g. http://127.0.0.1:11434/v1
    openai_model: str | None = None  # e.g. gpt-4o-mini
    openai_api_key: str | None = None  # else OPENAI_API_KEY
    # <think> / <tool_call> written as text by models served without a reasoning or tool
    # parser: "auto" where a reply uses them, "on" also for replies that open inside a think
    # block (DeepSeek-R1 distills, QwQ), "off" never (gateway/reference/text_tags.py).
    openai_text_tools: Literal["auto", "on", "off"] = "auto"
    # The model reads text only: attachments reach it as named placeholders (docs/attachments.md).
    openai_text_only: bool = False
    # Where read_file reads and write_note writes: never the directory the server started in.
    workspace: str = msgspec.field(default_factory=lambda: default_workspace(os.environ))
    # The limits of a turn every run of the reference loop starts with (LoopConfig: max_rounds,
    # tool_timeout_ms, …; docs/reference-loop.md); a run's own config wins.
    loop_config: dict[str, Any] = msgspec.field(default_factory=dict)

    # Bring your own loop (docs/loops.md): at most one of these; none runs the reference loop.
    loop: str | None = None  # "package.module:attr": an in-process Python loop
    loop_url: str | None = None  # an HTTP loop: the run request POSTed, NDJSON events back
    loop_cmd: str | None = None  # a child process speaking JSON-RPC on stdio
    # The plugged loop resumes runs from their events so far (docs/scale.md): another instance
    # sharing the journal resumes a lost instance's run instead of ending it owner_lost.
    loop_resumable: bool = False
    # Named agents ([agents.NAME] tables, docs/agents.md): each its own loop, chosen per run
    # by every front end. The loop settings above define one more, named "default", when no
    # agent is declared or when they name a loop or a real model.
    agents: dict[str, AgentSpec] = msgspec.field(default_factory=dict)
    # The attachment kinds the plugged loop takes besides text (image, audio, file, resource);
    # unset: what the loop declares (a Python loop's ``accepts``), else text only.
    accepts: list[str] | None = None
    loop_token: str | None = None  # bearer token sent to an HTTP loop
    loop_connect_timeout_s: float = 10.0  # reaching the loop; writing to it
    loop_first_event_timeout_s: float = 60.0  # a plugged loop's first event of a run
    loop_idle_timeout_s: float = 300.0  # between events (not while asking for permission)
    loop_cancel_grace_s: float = 5.0  # a cancelled loop's time to end its run itself
    loop_restart_max_s: float = 30.0  # longest back-off before a stdio loop is started again
    # A stdio loop's stderr, relayed to the gateway's: lines cut at this length (and marked),
    # at most this many bytes a second after a burst; the rest dropped, counted in the log.
    loop_stderr_max_line_bytes: int = 16 << 10  # longer lines cut
    loop_stderr_bytes_per_s: int = 64 << 10  # relayed a second
    loop_stderr_burst_bytes: int = 1 << 20  # a burst relayed
    loop_stderr_report_s: float = 10.0  # drops are summed up in the log at most this often
    # Where a --loop's generators run: "event_loop" (the gateway's own) or "thread" (one each,
    # with its own event loop: a loop that blocks stalls only itself; docs/loops.md).
    loop_runner: LoopRunner = "event_loop"
    # The event loop not running for this long is logged (WARNING), naming the loop and run
    # that held it: a blocking call (time.sleep, sync I/O) stalls every client meanwhile.
    stall_warning_s: float = 1.0

    # The reference loop as an agent: its tools and prompt.
    tools: list[str] = msgspec.field(default_factory=list)  # modules of Python functions
    demo_tools: bool | None = None  # unset: with the scripted model only
    # Modules of hook objects (the six LoopHooks methods) every run of the reference loop, of
    # every agent, gets (docs/reference-loop.md#hooks-for-operators).
    hooks: list[str] = msgspec.field(default_factory=list)
    # Hooks without code: deny_tools, approve_tools, max_result_chars, system_note.
    hook_rules: dict[str, Any] = msgspec.field(default_factory=dict)
    # USD per million tokens by model name ({input, output}): usage then carries costUsd.
    prices: dict[str, Any] = msgspec.field(default_factory=dict)
    system_prompt: str | None = None  # the system message of every run
    system_prompt_file: str | None = None  # the same, from a file
    mcp: list[str] = msgspec.field(default_factory=list)  # MCP servers to spawn (stdio)
    mcp_url: list[str] = msgspec.field(default_factory=list)  # MCP servers over HTTP
    mcp_connect_timeout_s: float = 10.0  # start, initialize and list tools
    mcp_call_timeout_s: float = 300.0  # one tool call
    mcp_max_threads: int = 64  # threads (ACP sessions) holding MCP servers; LRU closed beyond
    mcp_idle_timeout_s: float = 1800.0  # a thread's MCP servers unused this long are closed
    # Whether ACP clients on the network (/acp) may have the gateway spawn their stdio MCP
    # servers; `loopgate acp` on stdio always may (the IDE that starts it is trusted).
    acp_remote_stdio_mcp: bool = False

    # Where runs are kept: "memory", "sqlite:PATH", "redis://HOST:PORT/DB",
    # "redis+sentinel://HOST:PORT/SERVICE" or "postgresql://…" (docs/scale.md).
    journal: str = "memory"
    # With a PostgreSQL journal: the Redis through which instances share it (leases, live
    # fan-out, commands, the run queue's order); none: one instance (docs/scale.md).
    bus: str | None = None
    # all: accepts runs and runs loops; api: accepts (queues) runs, runs none; worker: runs
    # the queued runs of the others (docs/scale.md: roles). api and worker need a Redis
    # journal, or a PostgreSQL one with a bus.
    role: Literal["all", "api", "worker"] = "all"
    replay_dir: str = str(RECORDINGS)  # where {"replay": NAME} finds recorded streams

    max_body_bytes: int = 1 << 20  # a request body; 413 beyond
    max_attachment_bytes: int = 5 << 20  # one inline attachment, decoded
    max_message_attachment_bytes: int = 10 << 20  # a message's inline attachments, decoded
    max_attachment_store_bytes: int = 1 << 30  # the journal's attachments, each once; 429 past
    # Attachments referred to by a run with no record this long (a start that crashed) are
    # freed (docs/attachments.md); at most a day.
    attachment_orphan_grace_s: float = 600.0
    max_line_bytes: int = 2 << 20  # one ingested event (a big tool result fits)
    max_frame_bytes: int = 2 << 20  # one WebSocket message
    # permessage-deflate on WebSockets: what clients offer by default, and what makes an idle
    # WebSocket cost 62-75 KiB instead of 27-40 (two zlib states; docs/reliability.md).
    ws_compression: bool = False
    max_events_per_run: int = 100_000  # events in one run
    max_run_bytes: int = 256 << 20  # encoded payloads an external loop may push into one run
    # A running scripted run measured ~32 KiB of RSS and ~1.4 ms of CPU to start (1,000 at
    # once, over HTTP): a burst of this many fits; memory is bounded in bytes besides (below).
    max_active_runs: int = 1_000  # runs going; past it 429, or queued (max_queued_runs)
    # Loop runs past max_active_runs that wait for room (state queued) before 429; 0: none.
    # With a Redis journal, the runs waiting in the queue all instances share.
    max_queued_runs: int = 1_000
    max_runs: int = 1_000  # retention: finished runs beyond this are dropped, oldest first
    cache_runs: int = 256  # finished runs a durable journal also keeps in memory
    max_run_age_s: float = 24 * 3600.0  # finished runs older are dropped
    max_subscribers_per_run: int = 256  # clients of one run
    subscriber_max_lag: int = 10_000  # events a subscriber may fall behind before it is cut off
    max_batch: int = 512  # events written to a client per write
    keepalive_s: float = 15.0  # comments on quiet streams
    # Live deliveries coalesced: events that come within a window of the last wake-up reach a
    # run's subscribers together at the window's end, so a loop streaming a token every
    # fraction of a ms costs a write per window, not per token; an event after a window of
    # quiet (a run's first) goes at once (docs/benchmarks.md). 0: woken at each event.
    delivery_window_s: float = 0.002
    write_timeout_s: float = 30.0  # a client that accepts no bytes for this long is cut off
    ingest_idle_timeout_s: float = 300.0  # an ingest run quiet this long fails
    thread_wait_s: float = 60.0  # a start's longest wait for its thread's turn (multitask)
    replay_max_gap_s: float = 5.0  # recorded pace never waits longer than this between events
    shutdown_grace_s: float = 5.0  # runs' time to end on stop
    # Attempts at a run whose instance was lost or shut down, when its loop can resume (a
    # shared journal: docs/scale.md); past the last it ends owner_lost. 1: never resumed.
    max_run_attempts: int = 3
    permission_timeout_s: float = 300.0  # an unanswered approval request is a rejection
    # Webhooks (A2A push notifications, docs/a2a.md; a run's webhook, docs/api.md): each POST's
    # bound, how many tries one delivery gets (waiting webhook_backoff_s, then twice as long
    # each time, at most 30 s), and how many deliveries may be under way at once (past it a
    # push config is refused, a run's webhook not sent).
    webhook_timeout_s: float = 10.0  # one webhook POST
    webhook_attempts: int = 5  # tries per webhook delivery
    webhook_backoff_s: float = 0.5  # the first wait between tries (at most 30 s)
    webhook_max_jobs: int = 1_000  # webhook deliveries (and push-notified tasks) at once
    # Hostile input (docs/reliability.md): JSON nested deeper than this is refused where it
    # enters, with the protocol's parse error; a JSON-RPC response (a batch's, or one page of
    # run.events) stops growing past max_batch_response_bytes: later items get an error.
    max_json_depth: int = 128  # nesting of JSON input
    max_batch_response_bytes: int = 8 << 20  # one JSON-RPC response

    # Memory bounded in bytes and the journal's promise (docs/reliability.md). An event held in
    # memory counts as its encoded payload plus a fixed overhead (gateway.journal.base).
    max_retained_bytes: int = 256 << 20  # events in memory, all runs; finished runs leave first
    max_run_retained_bytes: int = 64 << 20  # one run's events; past it: failed / memory_limit
    max_batch_bytes: int = 1 << 20  # one write to one client (a bigger single event goes alone)
    max_dropped_ids: int = 10_000  # ids of dropped runs remembered: they answer 410, not 404
    journal_synchronous: Literal["normal", "full"] = "normal"  # SQLite; full: fsync per commit

    # Telemetry (docs/telemetry.md). Traces go out over OTLP/HTTP when an endpoint is set here
    # (a base URL; /v1/traces is appended) or in OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT;
    # nothing is exported by default.
    otel_endpoint: str | None = None  # OTLP/HTTP base URL
    otel_service_name: str | None = None  # else OTEL_SERVICE_NAME, else "loopgate"
    otel_export_timeout_s: float = 5.0  # per export; a collector that is down costs no more
    trace_console: bool = False  # print finished spans to stderr (local debugging)
    trace_content: bool = False  # message content (deltas, tool arguments/results) on spans
    trace_content_max_chars: int = 16_384  # per content attribute; longer values are clipped
    trace_max_open_spans: int = 1_024  # per run; tool calls beyond this get no span

    def __post_init__(self) -> None:
        for name in POSITIVE_FIELDS:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.webhook_backoff_s > 30:
            raise ValueError(f"webhook_backoff_s must be 30 s or less: {self.webhook_backoff_s}")
        if self.max_run_attempts > MAX_RUN_ATTEMPTS:
            raise ValueError(
                f"max_run_attempts must be at most {MAX_RUN_ATTEMPTS}, got {self.max_run_attempts}"
            )
        if not 0 <= self.delivery_window_s <= 1:
            raise ValueError(f"delivery_window_s must be 0 to 1 s, got {self.delivery_window_s}")
        if not (0 < self.port < 65536):
            raise ValueError(f"port must be between 1 and 65535, got {self.port}")
        check_journal_settings(self)
        plugs = [n for n in ("loop", "loop_url", "loop_cmd") if getattr(self, n)]
        if len(plugs) > 1:
            raise ValueError(f"give at most one of --loop, --loop-url, --loop-cmd (got {plugs})")
        if self.system_prompt and self.system_prompt_file:
            raise ValueError("give --system-prompt or --system-prompt-file, not both")
        if self.token_file:
            if self.token is not None:
                raise ValueError("give --token or --token-file, not both")
            self.token = check_token(read_token_file(self.token_file), "the token file")
        elif self.token is not None:
            self.token = check_token(self.token, "the token (--token, LOOPGATE_TOKEN)")
        self.trusted_proxies = [proxy_network(p) for p in self.trusted_proxies]
        self.proxy_admin_groups = [g.strip() for g in self.proxy_admin_groups if g.strip()]
        for name in PROXY_HEADERS:
            header = getattr(self, name)
            if header is not None:
                setattr(self, name, check_header_name(header, name))
        for entry in self.allowed_outbound:
            check_outbound_entry(entry)
        check_jwt_settings(self)
        if self.accepts is not None:
            self.accepts = sorted(parse_kinds(self.accepts))
        for name in self.agents:
            check_agent_name(name)
        defaults = [name for name, spec in self.agents.items() if spec.default]
        if len(defaults) > 1:
            raise ValueError(f"only one agent may be the default, not {' and '.join(defaults)}")

    @property
    def audit_destination(self) -> str:
        if self.audit_log == "auto":
            return "stderr" if self.has_credentials else "off"
        return self.audit_log

    @property
    def has_credentials(self) -> bool:
        """Whether any credential source is configured (then every request needs one)."""
        return bool(
            self.token or self.keys_file or self.jwks_url or self.jwks_file or self.trusted_proxies
        )

    def check_listening(self) -> None:
        """For the command that listens (serve): beyond loopback, a token is required. Only
        there: ``run``, ``acp`` and ``rpc`` listen on nothing, whatever LOOPGATE_HOST says."""
        if not is_loopback(self.host) and not self.has_credentials:
            raise ValueError(
                f"listening on {self.host} (beyond loopback) requires credentials: set "
                "--keys-file, a JWKS (--jwks-url), --trusted-proxy, or a token (--token-file, "
                "LOOPGATE_TOKEN_FILE) — docs/auth.md"
            )


# A run resumed more often than this is failing for a reason of its own, not its instances'.
MAX_RUN_ATTEMPTS = 10

# Limits that must be positive (zero would mean "never" or "nothing", which is never meant);
# a delay or a window of zero means none.
ZERO_ALLOWED = (
    "port",
    "scripted_delay_s",
    "delivery_window_s",
    "jwt_leeway_s",
    "max_queued_runs",  # 0: no queue, 429 at max_active_runs
    # 0: no limit
    "quota_concurrent_runs",
    "quota_runs_per_minute",
    "quota_events_per_day",
    "quota_tokens_per_day",
    "tenant_quota_concurrent_runs",
    "tenant_quota_runs_per_minute",
    "tenant_quota_events_per_day",
    "tenant_quota_tokens_per_day",
)
POSITIVE_FIELDS = tuple(
    f.name
    for f in msgspec.structs.fields(Settings)
    if f.type in (int, float) and f.name not in ZERO_ALLOWED
)


def default_workspace(env: Mapping[str, str]) -> str:
    """``$XDG_DATA_HOME/loopgate/workspace``, i.e. ``~/.local/share/loopgate/workspace``."""
    data_home = env.get("XDG_DATA_HOME") or str(
        Path(env.get("HOME") or "~").expanduser() / ".local" / "share"
    )
    return str(Path(data_home) / "loopgate" / "workspace")


def read_token_file(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the token file {path}: {exc.__class__.__name__}") from None
    if not token or any(c.isspace() for c in token):
        raise ValueError(f"the token file {path} must hold one token (no spaces), not empty")
    return token


# Settings given in one LOOPGATE_* variable as a comma-separated list.
LIST_FIELDS = (
    "accepts",
    "allowed_origins",
    "allowed_hosts",
    "tools",
    "hooks",
    "mcp_url",
    "trusted_proxies",
    "proxy_admin_groups",
    "allowed_outbound",
)


def load_settings(
    env: Mapping[str, str],
    overrides: Mapping[str, Any] | None = None,
    below: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then ``below`` (a config file's values, gateway/config_file.py), then
    ``LOOPGATE_*`` variables, then explicit overrides (CLI flags)."""
    values: dict[str, Any] = {}
    for name in Settings.__struct_fields__:
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is not None:
            values[name] = _parse_env(name, raw)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    # A choice of one of a kind (a token, a loop, a prompt, a JWKS) made in the environment or a
    # flag replaces the file's, whichever form each takes: not "give one, not both".
    filed = dict(below or {})
    for group in EXCLUSIVE:
        if any(k in values or k in given for k in group):
            for k in group:
                filed.pop(k, None)
    # The variable every OpenAI-compatible client reads, often set for other programs: a key
    # written in the file, or LOOPGATE_OPENAI_API_KEY, wins over it.
    unkeyed = "openai_api_key" not in values and "openai_api_key" not in filed
    if unkeyed and env.get("OPENAI_API_KEY"):
        values["openai_api_key"] = env["OPENAI_API_KEY"]
    if "token" in given or "token_file" in given:
        # A token given as a flag, in either form, replaces the environment's, in either form.
        values.pop("token", None)
        values.pop("token_file", None)
    provider = _provider(values, given, filed)
    values = {**filed, **values}
    values.setdefault("workspace", default_workspace(env))
    values.update(given)
    if provider is not None:
        values["provider"] = provider
    try:
        return msgspec.convert(values, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid setting: {str(exc).replace('$.', '')}") from None


# Settings of which one is given, in one of its forms: a higher layer's replaces the file's.
EXCLUSIVE = (
    ("token", "token_file"),
    ("loop", "loop_url", "loop_cmd"),
    ("system_prompt", "system_prompt_file"),
    ("jwks_url", "jwks_file"),
)


# Settings that name an OpenAI-compatible server or model: given without a provider, they
# choose the openai one; given with the scripted one, they would be silently ignored.
OPENAI_CHOICES = ("openai_base_url", "openai_model")


def _provider(
    env: Mapping[str, Any], flags: Mapping[str, Any], filed: Mapping[str, Any]
) -> str | None:
    """The provider: as a flag says; else ``openai`` where a flag names a server or model;
    else as the environment says, or ``openai`` where it names one; else None (the default,
    or the config file's choice, which it made alone: gateway/config_file.py).
    ValueError when ``scripted`` is chosen in the layer that names them."""
    if "provider" in flags:
        chosen, named = flags["provider"], [(k, True) for k in OPENAI_CHOICES if k in flags]
    elif any(k in flags for k in OPENAI_CHOICES):
        # Flags win: --openai-model with LOOPGATE_PROVIDER=scripted set asks for that model.
        chosen, named = None, [(k, True) for k in OPENAI_CHOICES if k in flags]
    else:
        chosen, named = env.get("provider"), [(k, False) for k in OPENAI_CHOICES if k in env]
    if chosen == "scripted" and named:
        said = " and ".join(_named(k, from_flag) for k, from_flag in named)
        where = "--provider scripted" if "provider" in flags else f"{ENV_PREFIX}PROVIDER=scripted"
        raise ValueError(
            f"{where} does not use {said}: drop {'them' if len(named) > 1 else 'it'}, "
            "or choose --provider openai"
        )
    if chosen is not None or not named:
        return None
    missing = [k for k in OPENAI_CHOICES if k not in flags and k not in env and k not in filed]
    if missing:
        raise ValueError(
            f"{_named(*named[0])} names an OpenAI-compatible model; it also needs "
            f"{_named(missing[0], True)} (or {_named(missing[0], False)})"
        )
    return "openai"


def _named(name: str, from_flag: bool) -> str:
    return "--" + name.replace("_", "-") if from_flag else ENV_PREFIX + name.upper()


def _parse_env(name: str, raw: str) -> Any:
    field = next(f for f in msgspec.structs.fields(Settings) if f.name == name)
    if field.type in (str, str | None) or "Literal" in repr(field.type):
        return raw
    if name in LIST_FIELDS:
        return [o.strip() for o in raw.split(",") if o.strip()]
    if name == "mcp":
        # Commands contain spaces and commas: one per line.
        return [line.strip() for line in raw.splitlines() if line.strip()]
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw
