"""``loopgate serve -c FILE``: a TOML file under LOOPGATE_* variables and flags, every mistake
told at its key's line; ``loopgate config check`` and ``config show`` as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import msgspec
import pytest

from loopgate.gateway.config_file import (
    ConfigError,
    key_lines,
    parse_config,
    read_config,
    settings_from,
)
from loopgate.gateway.settings import Settings
from tests.gateway.cli_support import loopgate
from tests.gateway.harness import REPO, free_port, gateway_process, stop, wait_healthy
from tests.gateway.sse_client import envelopes, read_stream

TOKEN = "config-file-t0ken-5f2a9c"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        settings_from(env or {}, None, parse_config(text, "loopgate.toml"))
    return caught.value.problems


def test_serve_takes_its_port_token_and_journal_from_the_file(tmp_path: Path) -> None:
    port = free_port()
    journal = tmp_path / "runs.sqlite3"
    config = write(
        tmp_path / "loopgate.toml",
        f'port = {port}\ntoken = "{TOKEN}"\njournal = "sqlite:{journal}"\nscripted_delay_s = 0.0\n',
    )
    env = {k: v for k, v in os.environ.items() if "LOOPGATE" not in k}
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopgate", "serve", "-c", str(config)],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc)
        assert httpx.post(f"{base}/v1/runs", json={"input": "hi"}).status_code == 401
        auth = {"authorization": f"Bearer {TOKEN}"}
        started = httpx.post(f"{base}/v1/runs", json={"input": "plain"}, headers=auth)
        assert started.status_code == 201
        events = envelopes(read_stream(base, started.json()["id"], headers=auth))
        assert events[-1]["kind"] == "completion"
    finally:
        assert stop(proc) in (0, 130)
    assert journal.stat().st_size > 0


def test_loopgate_config_names_the_file_and_flags_win(tmp_path: Path) -> None:
    """LOOPGATE_CONFIG instead of -c; the harness's --port beats the file's port."""
    unused = free_port()
    config = write(
        tmp_path / "loopgate.toml", f'port = {unused}\ntoken = "{TOKEN}"\nmax_active_runs = 1\n'
    )
    with gateway_process(env={"LOOPGATE_CONFIG": str(config)}) as (base, _):
        assert not base.endswith(f":{unused}")
        auth = {"authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{base}/v1/runs", headers=auth).status_code == 200
        assert httpx.get(f"{base}/v1/runs").status_code == 401
        body = {"source": "ingest"}
        assert httpx.post(f"{base}/v1/runs", json=body, headers=auth).status_code == 201
        # The file's max_active_runs = 1 holds: a second run at once is refused.
        assert httpx.post(f"{base}/v1/runs", json=body, headers=auth).status_code == 429


def test_defaults_then_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = write(
        tmp_path / "loopgate.toml",
        "port = 8001\nmax_active_runs = 5\nkeepalive_s = 3\nmax_runs = 9\n",
    )
    shown = show(
        tmp_path, "-c", str(config), "--max-active-runs", "7", env={"LOOPGATE_PORT": "8002"}
    )
    assert (shown["port"], shown["max_active_runs"], shown["keepalive_s"]) == (8002, 7, 3.0)
    assert shown["max_runs"] == 9 and shown["max_batch"] == Settings().max_batch


def test_a_higher_layer_replaces_the_files_choice_in_either_form(tmp_path: Path) -> None:
    token_file = write(tmp_path / "token", TOKEN + "-from-a-file\n")
    config = parse_config(
        f'token = "{TOKEN}"\nloop_url = "http://127.0.0.1:9/loop"\nsystem_prompt = "a"\n', "f"
    )
    settings = settings_from(
        {"LOOPGATE_SYSTEM_PROMPT_FILE": str(token_file)},
        {"token_file": str(token_file), "loop": "tests.plugs:echo"},
        config,
    )
    assert settings.token == TOKEN + "-from-a-file"
    assert (settings.loop, settings.loop_url) == ("tests.plugs:echo", None)
    assert settings.system_prompt is None


def test_the_openai_key_and_provider_layers() -> None:
    config = parse_config(
        'openai_base_url = "http://127.0.0.1:9/v1"\nopenai_model = "m"\nopenai_api_key = "f"\n',
        "f",
    )
    assert config.values["provider"] == "openai"
    settings = settings_from({"OPENAI_API_KEY": "shell"}, None, config)
    assert (settings.provider, settings.openai_api_key) == ("openai", "f")
    settings = settings_from({"LOOPGATE_OPENAI_API_KEY": "env"}, None, config)
    assert settings.openai_api_key == "env"
    # A higher layer choosing the scripted model leaves the file's server unused, no error.
    assert settings_from({"LOOPGATE_PROVIDER": "scripted"}, None, config).provider == "scripted"
    assert settings_from({}, {"provider": "scripted"}, config).provider == "scripted"
    # An environment naming its own model still finds the server in the file.
    only_server = parse_config('provider = "openai"\nopenai_base_url = "http://h/v1"\n', "f")
    settings = settings_from({"LOOPGATE_OPENAI_MODEL": "m2"}, None, only_server)
    assert (settings.provider, settings.openai_model) == ("openai", "m2")


def test_every_kind_of_mistake_names_its_key_and_line() -> None:
    text = (
        "# a gateway\n"
        "port = 8000\n"
        'max_runs = "5"\n'
        "max_run = 3\n"
        'provider = "opnai"\n'
        "allowed_hosts = [1, 2]\n"
        "keepalive_s = true\n"
        "\n"
        "[loop_config]\n"
        "tool_timeout_ms = 1000\n"
        "max_rounds = 0\n"
        "\n"
        "[agents.coder]\n"
        'loop = "my_loop:loop"\n'
        "loop_urll = 1\n"
        "\n"
        '[agents."two words"]\n'
        "[agents.helper]\n"
        "default = true\n"
        "[agents.other]\n"
        "default = true\n"
        'loop_cmd = "x"\n'
        'loop_url = "http://127.0.0.1:1"\n'
    )
    assert problems(text) == [
        "loopgate.toml:3: max_runs: expected int, got str",
        "loopgate.toml:4: max_run: unknown key 'max_run'; did you mean 'max_runs'?",
        'loopgate.toml:5: provider: expected one of "scripted", "openai", got "opnai"',
        "loopgate.toml:6: allowed_hosts: expected a list of str, got a list of int",
        "loopgate.toml:7: keepalive_s: expected float, got bool",
        "loopgate.toml:11: loop_config.max_rounds must be positive, got 0",
        "loopgate.toml:15: agents.coder.loop_urll: unknown key 'loop_urll'; did you mean "
        "'loop_url'?",
        "loopgate.toml:17: agents.two words: agent name 'two words' must be 1-64 letters, "
        "digits, '.', '_' or '-', starting with a letter or digit",
        "loopgate.toml:20: agents.other: give at most one of loop, loop_url, loop_cmd (got "
        "loop_url, loop_cmd)",
    ]
    assert problems("port = 8000\nfrobnicate = 1\n") == [
        "loopgate.toml:2: frobnicate: unknown key 'frobnicate' (docs/config.md lists every key)"
    ]


def test_a_value_settings_refuses_names_the_files_key() -> None:
    assert problems('port = 8000\ntoken = "short"\n') == [
        "loopgate.toml:2: token: the token (--token, LOOPGATE_TOKEN) must be at least 16 "
        "characters long"
    ]
    assert problems("\n\nport = 0\n") == [
        "loopgate.toml:3: port must be between 1 and 65535, got 0"
    ]
    assert problems('journal = "mysql://x"\n')[0].startswith(
        "loopgate.toml:1: journal must be 'memory', 'sqlite:PATH'"
    )
    # The environment's value is not the file's mistake: told as it is, with no line.
    assert problems("port = 8000\n", {"LOOPGATE_MAX_RUNS": "0"}) == [
        "max_runs must be positive, got 0"
    ]


def test_openai_settings_with_the_scripted_provider_in_the_file() -> None:
    assert problems('provider = "scripted"\n\nopenai_model = "m"\n') == [
        "loopgate.toml:3: openai_model: the scripted provider uses no OpenAI server or model: "
        'drop it, or set provider = "openai"'
    ]
    assert problems('openai_model = "m"\n') == [
        "loopgate.toml:1: openai_model: names an OpenAI-compatible model; the file also needs "
        'openai_base_url (or provider = "openai")'
    ]


def test_loop_config_keys_the_reference_loop_does_not_know() -> None:
    text = "[loop_config]\nmax_rounds = 3\nmax_roundz = 4\n"
    assert problems(text) == [
        "loopgate.toml:3: loop_config.max_roundz: unknown key 'max_roundz'; did you mean "
        "'max_rounds'? (the reference loop's keys)"
    ]
    # A plugged loop reads its own keys: passed on.
    plugged = settings_from({}, None, parse_config('loop = "m:x"\n' + text, "f"))
    assert plugged.loop_config == {"max_rounds": 3, "max_roundz": 4}
    assert problems("loop_config = 3\n") == [
        "loopgate.toml:1: loop_config: expected a table, got int"
    ]


def test_syntax_errors_and_unreadable_files(tmp_path: Path) -> None:
    assert problems("port = 8000\nmax_runs = = 3\n") == [
        "loopgate.toml:2:12: not valid TOML: invalid value"
    ]
    assert problems('port = 8000\nallowed_hosts = ["a"\n')[0].startswith("loopgate.toml:2")
    with pytest.raises(ConfigError) as caught:
        read_config(str(tmp_path / "nope.toml"))
    assert caught.value.problems == [f"{tmp_path / 'nope.toml'}: no such file"]
    (tmp_path / "latin1.toml").write_bytes(b'system_prompt = "caf\xe9"\n')
    with pytest.raises(ConfigError) as caught:
        read_config(str(tmp_path / "latin1.toml"))
    assert caught.value.problems == [f"{tmp_path / 'latin1.toml'}: not UTF-8 text"]


def test_key_lines_places_tables_dotted_and_inline_keys() -> None:
    text = (
        'system_prompt = """\n'
        "port = 1 is text here\n"
        '"""\n'
        "loop_config.max_rounds = 3\n"
        "mcp_url = [\n"
        '  "http://a",\n'
        "]\n"
        "trusted_proxies = ['10.0.0.1']   # the proxy\n"
        '"host" = "127.0.0.1"\n'
        "[ loop_config ]\n"
        "tool_timeout_ms = 1\n"
        "inline = { a = 1, b = 2 }\n"
    )
    lines = key_lines(text)
    assert "port" not in lines
    assert lines["system_prompt"] == 1
    assert lines["loop_config.max_rounds"] == 4 and lines["loop_config"] == 4
    assert (lines["mcp_url"], lines["trusted_proxies"], lines["host"]) == (5, 8, 9)
    assert lines["loop_config.tool_timeout_ms"] == 11
    assert (lines["loop_config.inline.a"], lines["loop_config.inline.b"]) == (12, 12)


def test_config_check_as_a_command(tmp_path: Path) -> None:
    good = write(tmp_path / "good.toml", "port = 8000\n[loop_config]\nmax_rounds = 4\n")
    done = loopgate(tmp_path, "config", "check", "good.toml")
    assert (done.returncode, done.stdout, done.stderr) == (0, "good.toml: ok\n", "")
    write(tmp_path / "bad.toml", 'port = "x"\nmax_runz = 1\n')
    done = loopgate(tmp_path, "config", "check", "bad.toml")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "bad.toml:1: port: expected int, got str",
        "bad.toml:2: max_runz: unknown key 'max_runz'; did you mean 'max_runs'?",
    ]
    done = loopgate(tmp_path, "config", "check", "missing.toml")
    assert (done.returncode, done.stderr) == (2, "missing.toml: no such file\n")
    assert good.exists()


def test_serve_refuses_a_bad_file_in_one_line_a_problem(tmp_path: Path) -> None:
    write(tmp_path / "loopgate.toml", 'port = 8000\ntoken = "short"\n')
    done = loopgate(tmp_path, "serve", "-c", "loopgate.toml")
    assert done.returncode == 2
    assert done.stderr == (
        "loopgate serve: loopgate.toml:2: token: the token (--token, LOOPGATE_TOKEN) must be "
        "at least 16 characters long\n"
    )


def show(cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    command = [sys.executable, "-m", "loopgate", "config", "show", *args]
    clean = {k: v for k, v in os.environ.items() if "LOOPGATE" not in k and "OPENAI" not in k}
    done = subprocess.run(
        command, cwd=cwd, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return tomllib.loads(done.stdout)


def test_config_show_masks_secrets_and_names_each_key_once(tmp_path: Path) -> None:
    config = write(
        tmp_path / "loopgate.toml",
        f'token = "{TOKEN}"\nopenai_api_key = "sk-file-secret"\n'
        'journal = "redis://:hunter2hunter2@127.0.0.1:6379/0"\n'
        'loop_url = "http://127.0.0.1:9/loop"\nloop_token = "loop-secret-value"\n'
        '[loop_config]\nmax_rounds = 4\nmine = "x"\n',
    )
    command = [sys.executable, "-m", "loopgate", "config", "show", "-c", str(config)]
    env = {k: v for k, v in os.environ.items() if "LOOPGATE" not in k and "OPENAI" not in k}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for secret in (TOKEN, "sk-file-secret", "hunter2", "loop-secret-value"):
        assert secret not in done.stdout
    shown = tomllib.loads(done.stdout)
    assert shown["token"] == shown["openai_api_key"] == shown["loop_token"] == "***"
    assert shown["journal"] == "redis://:***@127.0.0.1:6379/0"
    assert shown["loop_config"] == {"max_rounds": 4, "mine": "x"}
    # Every setting once: a value, a comment saying it is not set, or the [loop_config] table.
    named = [
        line.lstrip("# [").split(" ")[0].rstrip(":]")
        for line in done.stdout.split("[loop_config]")[0].splitlines()
        if line
    ]
    # [agents.NAME] tables follow [loop_config], one per agent (none here).
    named += ["loop_config", "agents"]
    assert sorted(named) == sorted(Settings.__struct_fields__)
    # The same settings as the file gives, but for the masks.
    settings = settings_from({}, None, read_config(str(config)))
    for name in ("port", "max_runs", "loop_url", "workspace"):
        assert shown[name] == msgspec.to_builtins(getattr(settings, name))


def test_config_show_with_a_token_file(tmp_path: Path) -> None:
    write(tmp_path / "token", TOKEN + "\n")
    shown = show(tmp_path, "--token-file", "token", env={"LOOPGATE_PORT": "8123"})
    assert "token" not in shown and (shown["token_file"], shown["port"]) == ("token", 8123)
