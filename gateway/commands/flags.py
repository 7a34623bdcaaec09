"""Flags the commands that run loops in-process share (`serve`, `run`, `acp`, `rpc`, `mcp`):
one definition, so every command takes the same loop, model and tool flags."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import get_args

from ...contracts.parts import ATTACHMENT_KINDS
from ..config_file import CONFIG_ENV
from ..reference.providers import PROVIDERS
from ..reference.text_tags import TEXT_TOOLS_MODES
from ..settings import LoopRunner

LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]


# The settings add_model_flags fills: the reference loop's model, the same for every command.
MODEL_SETTINGS = (
    "provider",
    "openai_base_url",
    "openai_model",
    "openai_text_tools",
    "openai_text_only",
    "scripted_delay_s",
)
# The settings add_loop_flags fills (each command passes them to load_settings).
LOOP_SETTINGS = (
    *MODEL_SETTINGS,
    "loop",
    "loop_url",
    "loop_cmd",
    "loop_token",
    "loop_runner",
    "loop_resumable",
    "accepts",
    "tools",
    "hooks",
    "demo_tools",
    "system_prompt",
    "system_prompt_file",
    "mcp",
    "mcp_url",
)


def add_config_flag(p: argparse.ArgumentParser) -> None:
    """-c/--config: the TOML config file (its agents, settings) a command runs on."""
    p.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help=f"read settings from this TOML file (or set {CONFIG_ENV}); LOOPGATE_* variables "
        "and flags override it (docs/config.md)",
    )


def add_loop_flags(p: argparse.ArgumentParser) -> None:
    plug = p.add_argument_group(
        "your own loop (docs/loops.md; at most one, default: the reference loop)"
    )
    plug.add_argument(
        "--loop",
        metavar="MODULE:ATTR",
        help="a Python async generator function (or a factory of one) taking the run context",
    )
    plug.add_argument(
        "--loop-url",
        metavar="URL",
        help="an HTTP endpoint: gets each run request POSTed, answers NDJSON LoopEvents",
    )
    plug.add_argument(
        "--loop-cmd",
        metavar="COMMAND",
        help='a child process speaking JSON-RPC on stdio, e.g. "python my_loop.py"; its stderr '
        "is relayed within the LOOPGATE_LOOP_STDERR_* bounds (docs/loops.md)",
    )
    plug.add_argument(
        "--loop-token",
        metavar="TOKEN",
        help="sent to an HTTP loop as Authorization: Bearer TOKEN (or LOOPGATE_LOOP_TOKEN)",
    )
    plug.add_argument(
        "--loop-runner",
        choices=get_args(LoopRunner),
        help="where --loop's runs are driven: 'event_loop' (the gateway's; the default) or "
        "'thread' (one each, for a loop that blocks: time.sleep, synchronous I/O; "
        "LOOPGATE_LOOP_RUNNER)",
    )
    plug.add_argument(
        "--loop-resumable",
        action="store_true",
        default=None,
        help="your loop can resume a run from its events so far (the run request's attempt "
        "and events): with a shared journal, another instance resumes a run whose instance "
        "was lost instead of ending it owner_lost (LOOPGATE_LOOP_RESUMABLE; docs/scale.md)",
    )
    plug.add_argument(
        "--accepts",
        type=_kinds,
        metavar="KINDS",
        help="the attachments your loop takes besides text, e.g. image,file (of image, audio, "
        "file, resource); default: what the loop declares, else text only (LOOPGATE_ACCEPTS; "
        "docs/attachments.md)",
    )
    ref = p.add_argument_group("the reference loop")
    add_model_flags(ref)
    ref.add_argument(
        "--tools",
        action="append",
        metavar="MODULE",
        help="a module whose functions become tools (type hints and docstring make the "
        "schema; repeatable)",
    )
    ref.add_argument(
        "--hooks",
        action="append",
        metavar="MODULE",
        help="a module of hook objects (pre_step, post_tool_result, on_request_error, "
        "before_completion, on_stream_chunk, tool_made_progress) every run gets (repeatable)",
    )
    ref.add_argument(
        "--demo-tools",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="offer the demo tools (clock, calculate, read_file, …); default: only with the "
        "scripted model",
    )
    ref.add_argument("--system-prompt", metavar="TEXT", help="the system message of every run")
    ref.add_argument("--system-prompt-file", metavar="PATH", help="the system message, from a file")
    ref.add_argument(
        "--mcp",
        action="append",
        metavar="COMMAND",
        help='an MCP server to start on stdio, its tools offered to the model, e.g. "npx -y '
        '@modelcontextprotocol/server-filesystem ." (repeatable)',
    )
    ref.add_argument(
        "--mcp-url",
        action="append",
        metavar="URL",
        help="an MCP server over streamable HTTP (repeatable)",
    )


def add_model_flags(group: argparse._ActionsContainer) -> None:
    """The reference loop's model: the embedded scripted one, or any OpenAI-compatible server."""
    group.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="the model: 'scripted' (embedded, no key, no network) or 'openai' (any "
        "OpenAI-compatible server: OpenAI, vLLM, Ollama, llama.cpp; LOOPGATE_PROVIDER). "
        "Default: openai when --openai-base-url or --openai-model is given, else scripted",
    )
    group.add_argument(
        "--openai-base-url",
        metavar="URL",
        help="the OpenAI-compatible server's base URL, e.g. http://127.0.0.1:11434/v1 "
        "(LOOPGATE_OPENAI_BASE_URL); its key: OPENAI_API_KEY or LOOPGATE_OPENAI_API_KEY",
    )
    group.add_argument(
        "--openai-model",
        metavar="NAME",
        help="the model the server should run, e.g. gpt-4o-mini (LOOPGATE_OPENAI_MODEL)",
    )
    group.add_argument(
        "--openai-text-tools",
        choices=TEXT_TOOLS_MODES,
        help="<think> and <tool_call> in the model's text (local models served without a tool "
        "parser) as reasoning and tool calls: 'auto' where a reply uses them (the default), "
        "'on' also when replies open inside a think block (DeepSeek-R1, QwQ), 'off' "
        "(LOOPGATE_OPENAI_TEXT_TOOLS)",
    )
    group.add_argument(
        "--openai-text-only",
        action="store_true",
        default=None,
        help="the model reads text only: images and other attachments reach it as named "
        "placeholders (LOOPGATE_OPENAI_TEXT_ONLY; docs/attachments.md)",
    )
    group.add_argument(
        "--scripted-delay",
        dest="scripted_delay_s",
        type=float,
        metavar="SECONDS",
        help="seconds between the scripted model's deltas (default 0.02; 0: none)",
    )


def _kinds(value: str) -> list[str]:
    kinds = {n.strip() for n in value.split(",") if n.strip()} - {"text"}
    unknown = sorted(kinds - set(ATTACHMENT_KINDS))
    if unknown:
        choices = ", ".join(ATTACHMENT_KINDS)
        raise argparse.ArgumentTypeError(f"unknown kind {unknown[0]!r}: choose from {choices}")
    return sorted(kinds)


def add_log_level(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--log-level",
        default=default,
        choices=LOG_LEVELS,
        help=f"what the log shows (default {default})",
    )


def add_client_token_flags(p: argparse.ArgumentParser) -> None:
    """The token a command presents to a gateway it talks to (``--server``)."""
    secret = p.add_mutually_exclusive_group()
    secret.add_argument(
        "--token",
        help="bearer token for --server. Visible to every user of this machine in `ps`: "
        "prefer --token-file or LOOPGATE_TOKEN",
    )
    secret.add_argument(
        "--token-file", metavar="PATH", help="read the token for --server from this file"
    )


def client_token(args: argparse.Namespace, env: Mapping[str, str]) -> str | None:
    """--token, else --token-file, else LOOPGATE_TOKEN (ValueError: an unreadable file)."""
    from ..settings import read_token_file

    if args.token:
        return str(args.token)
    if args.token_file:
        return read_token_file(args.token_file)
    return env.get("LOOPGATE_TOKEN") or None
