"""The gateway's settings from a TOML file (``loopgate serve -c FILE``, ``LOOPGATE_CONFIG``).

The file's top-level keys are :class:`~loopgate.gateway.settings.Settings` fields, with the
same names; ``[loop_config]`` is the reference loop's :class:`LoopConfig`. Layers, the later
winning: defaults < the file < ``LOOPGATE_*`` variables < flags. Every problem names the key
and its line, since a user fixes a file by going to a line.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

import msgspec

from ..contracts.agents import check_agent_name
from ..contracts.client_errors import ClientError
from .agents.spec import AgentSpec
from .plugs.operator_hooks import HookRules
from .reference.config import LoopConfig
from .reference.cost import price_table
from .settings import (
    ENV_PREFIX,
    EXCLUSIVE,
    OPENAI_CHOICES,
    Settings,
    load_settings,
)

CONFIG_ENV = "LOOPGATE_CONFIG"
FIELDS = {f.name: f.type for f in msgspec.structs.fields(Settings)}
# Tables checked whole at start, their problems said with the file's line: the operator's
# hook rules and prices.
TABLE_CHECKS: dict[str, Callable[[dict[str, Any]], object]] = {
    "hook_rules": HookRules.from_value,
    "prices": price_table,
}
AGENT_FIELDS = {f.name: f.type for f in msgspec.structs.fields(AgentSpec)}
# Settings whose values are credentials: never printed (config show) nor echoed in errors.
SECRETS = frozenset({"token", "openai_api_key", "loop_token"})


class ConfigError(ValueError):
    """Everything wrong with a config file, one problem a line, each naming its key and line."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class ConfigFile:
    """A read and type-checked config file: its values (as Settings takes them) and where each
    key was written."""

    path: str  # as the user named it: errors speak of the file by the name they gave
    values: dict[str, Any]
    lines: dict[str, int] = field(default_factory=dict)

    def where(self, key: str) -> str:
        """``path:line`` of ``key`` (a dotted path), or of the nearest table holding it."""
        parts = key.split(".")
        for end in range(len(parts), 0, -1):
            line = self.lines.get(".".join(parts[:end]))
            if line is not None:
                return f"{self.path}:{line}"
        return self.path

    def problem(self, key: str, message: str) -> str:
        short = key.rsplit(".", 1)[-1]
        # "max_rounds must be positive" already names its key: named once, in full.
        said = (
            key + message[len(short) :] if message.startswith(short + " ") else f"{key}: {message}"
        )
        return f"{self.where(key)}: {said}"


def config_path(given: str | None, env: Mapping[str, str]) -> str | None:
    """The config file to read: the flag's, else ``LOOPGATE_CONFIG``'s, else none."""
    return given or env.get(CONFIG_ENV) or None


def read_config(path: str) -> ConfigFile:
    """The file at ``path``, parsed and checked key by key; ConfigError listing every problem."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{path}: no such file"]) from None
    except IsADirectoryError:
        raise ConfigError([f"{path}: is a directory, not a config file"]) from None
    except PermissionError:
        raise ConfigError([f"{path}: not allowed to read it"]) from None
    except UnicodeDecodeError:
        raise ConfigError([f"{path}: not UTF-8 text"]) from None
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read it ({type(exc).__name__})"]) from None
    return parse_config(text, path)


def parse_config(text: str, path: str) -> ConfigFile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([syntax_problem(path, text, exc)]) from None
    config = ConfigFile(path, {}, key_lines(text))
    problems: list[str] = []
    for key, value in data.items():
        if key not in FIELDS:
            problems.append(config.problem(key, unknown(key, FIELDS)))
        elif key == "loop_config":
            problems += check_loop_config(config, value)
        elif key == "agents":
            problems += check_agents(config, value)
        elif key in TABLE_CHECKS and isinstance(value, dict):
            try:
                TABLE_CHECKS[key](value)
            except ValueError as exc:
                problems.append(config.problem(key, str(exc).removeprefix(f"{key}: ")))
            else:
                config.values[key] = value
        else:
            wrong = type_problem(key, FIELDS[key], value)
            if wrong:
                problems.append(config.problem(key, wrong))
            else:
                config.values[key] = value
    problems += choose_provider(config)
    if problems:
        raise ConfigError(problems)
    return config


def syntax_problem(path: str, text: str, exc: tomllib.TOMLDecodeError) -> str:
    """tomllib's account of a syntax error (about the user's file, nothing of ours), with its
    position moved to the front, where editors and terminals look for one."""
    message = str(exc)
    at = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if at:
        where = f"{path}:{at.group(1)}:{at.group(2)}"
    else:
        at = re.search(r"\s*\(at end of document\)$", message)
        where = f"{path}:{len(text.splitlines()) or 1}" if at else path
    what = message[: at.start()] if at else message
    return f"{where}: not valid TOML: {what[:1].lower()}{what[1:]}"


def unknown(key: str, known: Mapping[str, Any] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r}; did you mean {close[0]!r}?"
    return f"unknown key {key!r} (docs/config.md lists every key)"


def type_problem(key: str, tp: Any, value: Any) -> str | None:
    """What is wrong with ``value`` for a field of type ``tp`` (TOML's types, strictly: "5" is
    no int), or None."""
    try:
        msgspec.convert(value, tp, strict=True)
    except msgspec.ValidationError:
        got = toml_type(value)
        literal = get_origin(tp) is Literal or any(get_origin(a) is Literal for a in get_args(tp))
        if literal and isinstance(value, str) and key not in SECRETS:
            got = json.dumps(value[:64])  # the word that is not one of the choices
        return f"expected {type_name(tp)}, got {got}"
    return None


def type_name(tp: Any) -> str:
    """A field's type as the file's author thinks of it."""
    if tp is type(None):
        return "nothing"
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(a) for a in get_args(tp))
    if origin is list:
        return f"a list of {type_name(get_args(tp)[0])}"
    if origin is dict:
        return "a table"
    args = [a for a in get_args(tp) if a is not type(None)]
    if args and len(args) < len(get_args(tp)):
        return " or ".join(type_name(a) for a in args)
    return {int: "int", float: "float", str: "str", bool: "bool"}.get(tp, str(tp))


def toml_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        inner = sorted({toml_type(v) for v in value})
        return f"a list of {' and '.join(inner)}" if inner else "an empty list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


def check_loop_config(config: ConfigFile, value: Any, at: str = "loop_config") -> list[str]:
    """``[loop_config]`` (or an agent's, ``at``): each key LoopConfig knows checked as
    LoopConfig checks it. Keys it does not know are kept: a plugged loop may read its own
    (unknown_loop_config refuses them where the reference loop runs)."""
    if not isinstance(value, dict):
        return [config.problem(at, f"expected a table, got {toml_type(value)}")]
    problems = []
    known = LoopConfig.field_names()
    for key, item in value.items():
        if key in known:
            try:
                LoopConfig(**{key: item})
            except ClientError as exc:
                problems.append(config.problem(f"{at}.{key}", exc.message))
    if not problems and at == "loop_config":
        config.values["loop_config"] = value
    return problems


def check_agents(config: ConfigFile, value: Any) -> list[str]:
    """``[agents.NAME]`` tables: each name, key and value checked where it is written."""
    if not isinstance(value, dict):
        return [config.problem("agents", f"expected a table of agents, got {toml_type(value)}")]
    problems: list[str] = []
    agents: dict[str, Any] = {}
    for name, table in value.items():
        at = f"agents.{name}"
        try:
            check_agent_name(name)
        except ValueError as exc:
            problems.append(config.problem(at, str(exc)))
            continue
        if not isinstance(table, dict):
            problems.append(config.problem(at, f"expected a table, got {toml_type(table)}"))
            continue
        found = agent_problems(config, at, table)
        if not found:
            try:
                agents[name] = msgspec.convert(table, AgentSpec, strict=True)
            except (msgspec.ValidationError, ValueError) as exc:
                found.append(config.problem(at, str(exc).removeprefix("Invalid value: ")))
        problems += found
    defaults = [name for name, spec in agents.items() if spec.default]
    if len(defaults) > 1:
        problems.append(
            config.problem(f"agents.{defaults[1]}.default", f"{defaults[0]} is the default already")
        )
    if not problems:
        config.values["agents"] = agents
    return problems


def agent_problems(config: ConfigFile, at: str, table: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for key, item in table.items():
        where = f"{at}.{key}"
        if key not in AGENT_FIELDS:
            problems.append(config.problem(where, unknown(key, AGENT_FIELDS)))
        elif key == "loop_config":
            problems += check_loop_config(config, item, where)
        else:
            wrong = type_problem(key, AGENT_FIELDS[key], item)
            if wrong:
                problems.append(config.problem(where, wrong))
    return problems


def unknown_loop_config(config: ConfigFile, settings: Settings) -> list[str]:
    """Keys of the file's [loop_config] the reference loop does not know, when it is the loop
    (it would ignore them: a misspelt limit would silently not apply)."""
    if settings.loop or settings.loop_url or settings.loop_cmd:
        return []
    filed = config.values.get("loop_config") or {}
    known = LoopConfig.field_names()
    return [
        config.problem(f"loop_config.{key}", unknown(key, known) + " (the reference loop's keys)")
        for key in filed
        if key not in known and key in settings.loop_config
    ]


def choose_provider(config: ConfigFile) -> list[str]:
    """The model provider, as flags choose it: an OpenAI server or model named in the file
    chooses ``openai``; ``scripted`` with them is a mistake. Settled here, within the file, so
    a variable or flag that chooses otherwise replaces the file's choice whole."""
    values = config.values
    named = [k for k in OPENAI_CHOICES if k in values]
    if not named:
        return []
    chosen = values.get("provider")
    if chosen == "scripted":
        return [
            config.problem(
                named[0],
                "the scripted provider uses no OpenAI server or model: drop it, or set "
                'provider = "openai"',
            )
        ]
    if chosen is None:
        missing = [k for k in OPENAI_CHOICES if k not in values]
        if missing:
            return [
                config.problem(
                    named[0],
                    f"names an OpenAI-compatible model; the file also needs {missing[0]} (or "
                    'provider = "openai")',
                )
            ]
        values["provider"] = "openai"
    return []


def settings_from(
    env: Mapping[str, str], overrides: Mapping[str, Any] | None, config: ConfigFile | None
) -> Settings:
    """The effective settings: defaults < the file < ``LOOPGATE_*`` < flags. A setting the
    file gave that Settings refuses is reported at its line."""
    if config is None:
        return load_settings(env, overrides)
    try:
        settings = load_settings(env, overrides, below=config.values)
    except ValueError as exc:
        raise ConfigError([blame(config, str(exc), env, overrides)]) from None
    problems = unknown_loop_config(config, settings)
    if problems:
        raise ConfigError(problems)
    return settings


def blame(
    config: ConfigFile, message: str, env: Mapping[str, str], overrides: Mapping[str, Any] | None
) -> str:
    """``message`` at the line of the file's key it is about, if a key the file still decides
    (one no variable or flag replaced) is named in it; else as it is."""
    message = message.removeprefix("invalid setting: ")
    given = {k for k, v in (overrides or {}).items() if v is not None}
    given |= {k for k in FIELDS if ENV_PREFIX + k.upper() in env}
    for group in EXCLUSIVE:
        if given.intersection(group):
            given.update(group)
    found: list[tuple[int, str]] = []
    for key in config.values:
        if key in given:
            continue
        spellings = (key, "--" + key.replace("_", "-"), ENV_PREFIX + key.upper())
        for spelt in spellings:
            at = re.search(rf"(?<![\w-]){re.escape(spelt)}(?![\w-])", message)
            if at:
                found.append((at.start(), key))
                break
    if not found:
        return message
    return config.problem(min(found)[1], message)


def key_lines(text: str) -> dict[str, int]:
    """The line each key (dotted path) and table of a TOML text is first written on.

    tomllib keeps no positions, so this reads the lines itself: table headers, ``key =`` and
    dotted ``a.b =`` lines, and the keys of a one-line inline table. Lines within multi-line
    strings are skipped. Enough for a config file's key/value lines, not a TOML parser: a key
    it cannot place gets its table's line, or the file's name alone."""
    lines: dict[str, int] = {}
    table: list[str] = []
    open_string: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if open_string:
            if raw.count(open_string) % 2:
                open_string = None
            continue
        if not line or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header:
            table = _key_path(header.group(1))
            _note(lines, table, number)
            continue
        assign = _ASSIGN.match(line)
        if not assign:
            continue
        path = [*table, *_key_path(assign.group(1))]
        _note(lines, path, number)
        rest = line[assign.end() :]
        for quotes in ('"""', "'''"):
            if rest.count(quotes) % 2:
                open_string = quotes
        if rest.lstrip().startswith("{"):
            for inner in _INLINE_KEY.finditer(rest):
                _note(lines, [*path, *_key_path(inner.group(1))], number)
    return lines


_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_HEADER = re.compile(rf"^\[\[?\s*({_DOTTED})\s*\]\]?")
_ASSIGN = re.compile(rf"^({_DOTTED})\s*=")
_INLINE_KEY = re.compile(rf"[{{,]\s*({_DOTTED})\s*=")
_PART = re.compile(_KEY)


def _key_path(dotted: str) -> list[str]:
    return [p.strip("\"'") for p in _PART.findall(dotted)]


def _note(lines: dict[str, int], path: list[str], number: int) -> None:
    for end in range(1, len(path) + 1):
        lines.setdefault(".".join(path[:end]), number)


def settings_for_command(
    given: str | None, env: Mapping[str, str], overrides: Mapping[str, Any] | None
) -> Settings:
    """What ``serve`` and ``config show`` run on: the file named by ``-c`` or
    ``LOOPGATE_CONFIG`` (if any) under the environment and flags."""
    path = config_path(given, env)
    config = read_config(path) if path else None
    return settings_from(env, overrides, config)


def settings_toml(settings: Settings) -> str:
    """``settings`` as a TOML config file, each key once, secrets as ``"***"`` (as are the
    passwords of URLs: a Redis journal's, a server's). Unset keys are comments: TOML has no
    null, and leaving a key out is how a file leaves it unset."""
    out: list[str] = []
    for name in Settings.__struct_fields__:
        value = getattr(settings, name)
        if name in ("loop_config", "agents"):
            continue
        if name == "token" and settings.token_file:
            out.append("# token: read from token_file")
        elif value is None:
            out.append(f"# {name}: not set")
        else:
            out.append(f"{name} = {toml_value(MASK if name in SECRETS else masked_urls(value))}")
    out += ["", "[loop_config]"]
    out += [f"{toml_key(k)} = {toml_value(v)}" for k, v in settings.loop_config.items()]
    unset = msgspec.structs.asdict(AgentSpec())
    for agent, spec in settings.agents.items():
        # Only what the agent's table sets: the rest is its defaults (docs/config.md).
        out += ["", f"[agents.{toml_key(agent)}]"]
        for name, value in msgspec.structs.asdict(spec).items():
            if value is None or value == unset[name]:
                continue
            shown = MASK if name in SECRETS else masked_urls(value)
            out.append(f"{name} = {toml_value(shown)}")
    return "\n".join(out) + "\n"


MASK = "***"
_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):[^/@]*@")


def masked_urls(value: Any) -> Any:
    if isinstance(value, str):
        return _URL_PASSWORD.sub(rf"\1:{MASK}@", value)
    if isinstance(value, list):
        return [masked_urls(v) for v in value]
    return value


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # JSON's escapes are TOML's (\uXXXX for the rest): a basic string.
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        items = [f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    return json.dumps(str(value))


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


__all__ = [
    "CONFIG_ENV",
    "ConfigError",
    "ConfigFile",
    "read_config",
    "settings_for_command",
    "settings_from",
    "settings_toml",
]
