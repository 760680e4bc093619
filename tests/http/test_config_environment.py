"""Configuration from the environment (awaken/config/environment.py): ``AWAKEN_<SECTION>__<KEY>`` over the file
over the defaults, values typed by their key, JSON for lists and arrays of tables, ``…_FILE`` for secrets, the
default agents with no config file; ``awaken config check`` and ``awaken --version``; and a container-style
start, a real process with no config file and environment variables alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tomllib

import httpx
import orjson
import pytest
import trio

from awaken import __version__
from awaken.cli import main
from awaken.config import load_config
from awaken.config.environment import DEFAULT_AGENTS, redacted, secret_files
from awaken.core.errors import ConfigError
from tests.builders import ROOT, bearer, free_port

CONFIG = ROOT / "config.toml"


def test_the_environment_overrides_the_file_which_overrides_the_defaults():
    config = load_config(CONFIG, {
        "AWAKEN_SERVER__BIND": "0.0.0.0:9000",            # a string
        "AWAKEN_SERVER__WORKERS": "1",                    # an integer
        "AWAKEN_SERVER__KEEPALIVE_SECONDS": "2.5",        # a number
        "AWAKEN_AUTH__ALLOW_UNAUTHENTICATED": "true",     # a boolean
        "AWAKEN_SERVER__CORS_ORIGINS": '["https://app.example"]',  # a list: JSON
        "AWAKEN_DEFAULT_AGENT": "guarded",                # a top-level key
        "AWAKEN_LEDGER__OPTIONS__BUSY_TIMEOUT": "5",      # a free-form table: JSON when it parses
        "AWAKEN_OPS_TOKEN": "not-a-setting",              # no "__": the kind of variable a token table names
    })
    assert config.server.bind == "0.0.0.0:9000"
    assert config.server.keepalive_seconds == 2.5
    assert config.auth.allow_unauthenticated is True
    assert config.server.cors_origins == ["https://app.example"]
    assert config.default_agent == "guarded"
    assert config.ledger.options == {"busy_timeout": 5}
    # what the environment does not set stays the file's, and what neither sets the default
    file = tomllib.loads(CONFIG.read_text())
    assert config.server.replay_bytes == file["server"]["replay_bytes"]
    assert config.server.max_large_bodies == 4


def test_an_agent_is_matched_case_insensitively_and_a_new_one_can_be_added():
    config = load_config(CONFIG, {"AWAKEN_AGENTS__ASSISTANT__MAX_STEPS": "3",
                                  "AWAKEN_AGENTS__Guarded__DESCRIPTION": "Asks first.",
                                  "AWAKEN_AGENTS__HELPER__MODEL": "scripted",
                                  "AWAKEN_AGENTS__HELPER__TOOLS": '["calculator"]'})
    assert config.agents["assistant"].max_steps == 3
    assert config.agents["guarded"].description == "Asks first."
    assert set(config.agents) == {"assistant", "guarded", "frontend", "helper"}
    assert config.agents["helper"].tools == ["calculator"]


def test_a_tools_settings_table_is_set_by_its_tool_name():
    config = load_config(CONFIG, {"AWAKEN_TOOLS__WEATHER__UNITS": "metric", "AWAKEN_TOOLS__WEATHER__RETRIES": "2",
                                  "AWAKEN_TOOLS__PLUGINS": '["tests.plugins.toolkit:weather"]'})
    assert config.tools.settings == {"weather": {"units": "metric", "retries": 2}}
    assert config.tools.plugins == ["tests.plugins.toolkit:weather"]


def test_an_array_of_tables_takes_a_json_value():
    tokens = [{"name": "ops", "env": "OPS_KEY", "role": "admin", "subject": "ops"}]
    config = load_config(CONFIG, {"AWAKEN_AUTH__MODE": "tokens", "AWAKEN_AUTH__TOKENS": orjson.dumps(tokens).decode()})
    assert config.auth.mode == "tokens"
    assert [(t.name, t.env, t.role, t.subject) for t in config.auth.tokens] == [("ops", "OPS_KEY", "admin", "ops")]


@pytest.mark.parametrize(("environ", "message"), [
    ({"AWAKEN_SERVER__BINDX": "x"}, "AWAKEN_SERVER__BINDX: server has no key 'bindx'"),
    ({"AWAKEN_NOPE__X": "1"}, "AWAKEN_NOPE__X: the configuration has no key 'nope'"),
    ({"AWAKEN_SERVER__WORKERS": "two"}, "AWAKEN_SERVER__WORKERS: expected an integer, got 'two'"),
    ({"AWAKEN_AUTH__ALLOW_UNAUTHENTICATED": "maybe"},
     "AWAKEN_AUTH__ALLOW_UNAUTHENTICATED: expected true or false, got 'maybe'"),
    ({"AWAKEN_AUTH__TOKENS": "ops"}, "AWAKEN_AUTH__TOKENS: expected a JSON array, got 'ops'"),
    ({"AWAKEN_SERVER__BIND__X": "1"}, "AWAKEN_SERVER__BIND__X: server.bind is not a table"),
])
def test_a_bad_variable_is_refused_naming_it(environ, message):
    with pytest.raises(ConfigError) as caught:
        load_config(CONFIG, environ)
    assert str(caught.value) == message


def test_a_value_from_the_environment_is_validated_as_the_file_would_be():
    with pytest.raises(ConfigError, match=r"server\.workers: 0 is out of range"):
        load_config(CONFIG, {"AWAKEN_SERVER__WORKERS": "0"})


def test_a_file_variant_reads_the_value_and_the_variable_itself_wins(tmp_path):
    secret = tmp_path / "bind"
    secret.write_text("0.0.0.0:7000\n")
    assert load_config(CONFIG, {"AWAKEN_SERVER__BIND_FILE": str(secret)}).server.bind == "0.0.0.0:7000"
    both = {"AWAKEN_SERVER__BIND_FILE": str(secret), "AWAKEN_SERVER__BIND": "127.0.0.1:7001"}
    assert load_config(CONFIG, both).server.bind == "127.0.0.1:7001"
    with pytest.raises(ConfigError, match=r"^AWAKEN_SERVER__BIND_FILE: cannot read '/nonexistent/bind'"):
        load_config(CONFIG, {"AWAKEN_SERVER__BIND_FILE": "/nonexistent/bind"})


def test_the_secrets_the_config_names_can_come_from_files(tmp_path):
    (tmp_path / "ops").write_text("k" * 32 + "\n")
    (tmp_path / "jwt").write_text("s" * 40)
    data = {"auth": {"tokens": [{"env": "OPS_KEY"}], "jwt": {"secret_env": "JWT_SECRET"}},
            "mcp_servers": {"crm": {"headers_env": {"Authorization": "CRM_AUTH"}},
                            "local": {"env": {"LOCAL_MODE": "FAST"}}}}  # a child's values, not names
    environ = {"OPS_KEY_FILE": str(tmp_path / "ops"), "JWT_SECRET_FILE": str(tmp_path / "jwt"),
               "CRM_AUTH": "set", "CRM_AUTH_FILE": "/nonexistent",  # set: the file is not read
               "FAST_FILE": "/nonexistent"}
    assert secret_files(data, environ) == {"OPS_KEY": "k" * 32, "JWT_SECRET": "s" * 40}


def test_with_no_config_file_the_default_agents_are_served():
    config = load_config(None, {})
    assert config.default_agent == "assistant"
    # the embedded defaults are config.toml's demo agents
    assert config.agents == load_config(CONFIG, {}).agents
    assert set(DEFAULT_AGENTS) == set(tomllib.loads(CONFIG.read_text())["agents"])
    assert load_config(None, {"AWAKEN_AGENTS__ASSISTANT__MAX_STEPS": "2"}).agents["assistant"].max_steps == 2


def test_secrets_are_redacted_from_the_effective_settings():
    config = load_config(CONFIG, {"AWAKEN_LEDGER__PATH": "postgresql://awaken:hunter2@db:5432/awaken",
                                  "AWAKEN_LEDGER__OPTIONS__PASSWORD": "hunter2",
                                  "AWAKEN_MCP_SERVERS__CRM__TRANSPORT": "stdio",
                                  "AWAKEN_MCP_SERVERS__CRM__COMMAND": "crm-mcp",
                                  "AWAKEN_MCP_SERVERS__CRM__ENV": '{"CRM_KEY": "hunter2"}'})
    shown = redacted(config)
    assert shown["ledger"]["path"] == "postgresql://<redacted>@db:5432/awaken"
    assert shown["ledger"]["options"] == {"password": "<redacted>"}
    assert shown["mcp_servers"]["crm"]["env"] == {"CRM_KEY": "<redacted>"}
    assert shown["mcp_servers"]["crm"]["command"] == "crm-mcp"
    assert "hunter2" not in orjson.dumps(shown).decode()


def test_config_check_prints_the_effective_settings_redacted(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no ./config.toml here: the environment and the defaults
    monkeypatch.setenv("AWAKEN_SERVER__BIND", "127.0.0.1:9100")
    monkeypatch.setenv("AWAKEN_PROVIDERS__OPENAI__BASE_URL", "https://ops:hunter2@llm.example/v1")
    assert main(["config", "check"]) == 0
    out, err = capsys.readouterr()
    shown = orjson.loads(out)
    assert shown["server"]["bind"] == "127.0.0.1:9100"
    assert shown["providers"] == {"openai": {"base_url": "https://<redacted>@llm.example/v1"}}
    assert set(shown["agents"]) == {"assistant", "guarded", "frontend"}
    assert err == "awaken: the configuration is valid (no config file; environment over file over default)\n"
    assert "hunter2" not in out + err


def test_config_check_refuses_a_bad_configuration_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AWAKEN_SERVER__WORKERS", "two")
    assert main(["config", "check", "--config", str(CONFIG)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "awaken: AWAKEN_SERVER__WORKERS: expected an integer, got 'two'\n")
    monkeypatch.delenv("AWAKEN_SERVER__WORKERS")
    monkeypatch.setenv("AWAKEN_AUTH__MODE", "tokens")
    assert main(["config", "check", "--config", str(CONFIG)]) == 2
    assert "auth.mode = \"tokens\" needs at least one [[auth.tokens]] table" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"awaken {__version__}\n"


async def test_a_container_start_with_no_config_file_serves_the_default_agents(tmp_path):
    """A real process started in an empty directory: every setting from the environment (a token's key
    from a file), the default agents served, JSON log lines that never hold the key."""
    (tmp_path / "ops-key").write_text("o" * 40 + "\n")
    port = free_port()
    tokens = [{"name": "ops", "env": "OPS_KEY", "role": "admin", "subject": "ops"}]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWAKEN_")}
    environ.update({"PYTHONUNBUFFERED": "1", "AWAKEN_SERVER__BIND": f"127.0.0.1:{port}",
                    "AWAKEN_LEDGER__PATH": str(tmp_path / "awaken.db"), "AWAKEN_SERVER__LOG_FORMAT": "json",
                    "AWAKEN_SERVER__DRAIN_SECONDS": "1", "AWAKEN_AUTH__MODE": "tokens",
                    "AWAKEN_AUTH__TOKENS": orjson.dumps(tokens).decode(), "OPS_KEY_FILE": str(tmp_path / "ops-key")})
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = await trio.lowlevel.open_process([sys.executable, "-m", "awaken", "serve"], cwd=str(tmp_path),
                                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                                env=environ)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            with trio.fail_after(30):
                while True:
                    try:
                        if (await client.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.poll() is None, log.read_text()
                    await trio.sleep(0.1)
            assert (await client.get("/v1/agents")).status_code == 401
            agents = await client.get("/v1/agents", headers=bearer("o" * 40))
            assert agents.status_code == 200
            assert [a["id"] for a in agents.json()["agents"]] == ["assistant", "guarded", "frontend"]
    finally:
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            await proc.wait()
    assert proc.returncode == 0
    text = log.read_text()
    lines = [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]
    requests = [(r["method"], r["route"], r["status"], r.get("subject")) for r in lines if r.get("event") == "request"]
    assert ("GET", "/v1/agents", 401, None) in requests
    assert ("GET", "/v1/agents", 200, "ops") in requests
    assert "o" * 40 not in text
