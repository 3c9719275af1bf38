"""agentvisor import-hermes on realistic Hermes configs (keys from Hermes' own docs)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from agentvisor.config import config_from_dict
from agentvisor.errors import ConfigError
from agentvisor.hermes import import_hermes
from agentvisor.sandbox.env import looks_like_credential

from ..conftest import run_cli

# A gateway deployment on the docker backend, written the way Hermes documents it
# (configuration.md "Docker Backend", security.md "Approval Modes", "Deny Rules").
DOCKER_GATEWAY = textwrap.dedent("""
    model:
      default: "anthropic/claude-opus-4.6"
      provider: "openrouter"
    terminal:
      backend: docker
      cwd: "/workspace"
      timeout: 180
      lifetime_seconds: 300
      docker_image: "nikolaik/python-nodejs:python3.11-nodejs20"
      docker_mount_cwd_to_workspace: true
      docker_run_as_host_user: false
      docker_forward_env: ["GITHUB_TOKEN", "NPM_TOKEN", "PROJECT_NAME"]
      docker_env: {DEBUG: "1", PYTHONUNBUFFERED: "1"}
      docker_volumes:
        - "/srv/projects:/workspace/projects"
        - "/srv/data:/data:ro"
        - "~/.ssh:/root/.ssh:ro"
        - "/var/run/docker.sock:/var/run/docker.sock"
      docker_extra_args: ["--gpus=all", "--network=host", "--cap-add", "SETUID",
                          "--security-opt", "seccomp=unconfined"]
      docker_network: true
      docker_persist_across_processes: true
      container_cpu: 2
      container_memory: 5120
      container_disk: 51200
      container_persistent: true
      sudo_password: "hunter2"
    approvals:
      mode: smart
      timeout: 300
      cron_mode: approve
      single_query_mode: deny
      unattended_mode: deny
      mcp_reload_confirm: true
      deny:
        - "git push --force*"
        - "*curl*|*sh*"
        - "dd if=* of=/dev/*"
    command_allowlist: [rm, systemctl]
    toolsets: [hermes-cli]
    platform_toolsets:
      cli: [terminal, file, web, browser, memory]
      telegram: [web, memory]
    security:
      website_blocklist:
        enabled: true
        domains: ["*.internal.company.com", "admin.example.com"]
      allow_private_urls: true
""")

# The shipped example (cli-config.yaml.example): local backend, YOLO-ish approvals.
LOCAL_DEFAULTS = textwrap.dedent("""
    terminal:
      backend: "local"
      cwd: "."
      timeout: 180
      home_mode: "auto"
      docker_mount_cwd_to_workspace: false
      lifetime_seconds: 300
    approvals:
      mode: off
    platform_toolsets:
      cli: [memory, skills, clarify]
    compression:
      enabled: true
""")


def imported(text: str, env: dict[str, str] | None = None):
    result = import_hermes(yaml.safe_load(text), env=env)
    config = config_from_dict(result.config, source="test")  # the output is a valid config
    return result, config


def test_docker_gateway_maps_and_narrows() -> None:
    result, config = imported(DOCKER_GATEWAY, {"HERMES_WRITE_SAFE_ROOT": "/srv/projects"})
    sb = config.sandbox
    assert sb.backend == "docker" and sb.docker.image.startswith("nikolaik/python-nodejs")
    assert (sb.docker.cpus, sb.memory_mb, sb.docker.disk_mb) == (2.0, 5120, 51200)
    assert sb.persistent is True and sb.timeout == 180 and sb.idle_timeout == 300
    assert sb.mounts == ["/srv/projects:/workspace/projects:rw", "/srv/data:/data:ro"]
    assert sb.network == "none"
    assert sb.env_passthrough == ["PROJECT_NAME"]
    assert sb.docker.extra_args == ["--cap-add", "SETUID"]
    assert config.approvals.mode == "smart" and config.approvals.timeout == 300
    assert config.approvals.unattended == "deny"
    assert config.toolsets == ["file", "terminal", "web"]
    assert config.files.write_roots == ["/srv/projects"]
    rules = [(r.decision, r.kind, r.pattern) for r in config.rules]
    assert ("deny", "exec", "[gG][iI][tT] [pP][uU][sS][hH] --[fF][oO][rR][cC][eE]* *") in rules
    assert ("deny", "exec", "[dD][dD] [iI][fF]=* [oO][fF]=/[dD][eE][vV]/* *") in rules
    assert ("deny", "fetch", "*.internal.company.com") in rules
    stricter = "\n".join(result.stricter)
    for expected in (
        "docker_network: true -> sandbox.network: none",
        "'~/.ssh:/root/.ssh:ro' dropped",
        "docker.sock:/var/run/docker.sock' dropped",
        "--gpus=all dropped",
        "--network=host dropped",
        "--security-opt seccomp=unconfined dropped",
        "credentials not forwarded into the sandbox: GITHUB_TOKEN, NPM_TOKEN",
        "sudo_password: not imported",
        "cron_mode: approve -> approvals.unattended",
        "command_allowlist (rm, systemctl): not imported",
        "allow_private_urls: true -> not imported",
        "docker_run_as_host_user: false -> sandbox.docker.user: auto",
    ):
        assert expected in stricter, (expected, stricter)
    unmapped = "\n".join(result.unmapped)
    for expected in (
        "docker_env (DEBUG, PYTHONUNBUFFERED)",
        "'*curl*|*sh*'",
        "browser, memory",
        "platform_toolsets for telegram",
        "docker_persist_across_processes",
        "mcp_reload_confirm",
        "ignored, not about what the agent may reach: model",
    ):
        assert expected in unmapped, (expected, unmapped)


def test_local_defaults_become_the_sandbox() -> None:
    result, config = imported(LOCAL_DEFAULTS)
    assert config.sandbox.backend == "bwrap"
    assert config.approvals.mode == "off"  # a bare YAML `off` is false: still understood
    assert config.toolsets == []  # none of memory, skills, clarify exists here
    text = "\n".join(result.stricter)
    assert "terminal.backend: local -> sandbox.backend: bwrap" in text
    assert "HERMES_WRITE_SAFE_ROOT unset" in text
    assert any("home_mode" in line for line in result.unmapped)


@pytest.mark.parametrize("text", [DOCKER_GATEWAY, LOCAL_DEFAULTS, "{}"])
def test_nothing_is_widened(text: str) -> None:
    _, config = imported(text)
    assert config.sandbox.network == "none"
    assert not [n for n in config.sandbox.env_passthrough if looks_like_credential(n)]
    assert config.sandbox.env_passthrough_secrets == []
    assert config.approvals.unattended == "deny"
    assert not [r for r in config.rules if r.decision != "deny"]
    assert set(config.toolsets) <= {"file", "terminal", "web", "debugging"}
    assert config.sandbox.allow_unenforced_limits is False
    assert all(".ssh" not in m and "docker.sock" not in m for m in config.sandbox.mounts)


def test_cli_writes_the_file_and_reports(tmp_path: Path, isolated_home: Path) -> None:
    hermes = isolated_home / ".hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text(DOCKER_GATEWAY)
    (hermes / ".env").write_text(
        "OPENROUTER_API_KEY=sk-not-read\nHERMES_WRITE_SAFE_ROOT=/srv/projects:/srv/out\n"
    )
    env = {"HOME": str(isolated_home), "PATH": "/usr/bin:/bin"}
    out = tmp_path / "agentvisor.yaml"
    result = run_cli("import-hermes", "-o", str(out), env=env)
    assert result.returncode == 0, result.stderr
    assert "made stricter:" in result.stdout and "not mapped:" in result.stdout
    assert "sk-not-read" not in result.stdout + out.read_text()
    written = yaml.safe_load(out.read_text())
    assert written["files"]["write_roots"] == ["/srv/projects", "/srv/out"]
    config_from_dict(written)
    again = run_cli("import-hermes", "-o", str(out), env=env)
    assert again.returncode == 125 and "--force" in again.stderr
    assert run_cli("import-hermes", "-o", str(out), "--force", env=env).returncode == 0


def test_cli_prints_yaml_on_stdout_and_the_report_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "hermes.yaml"
    path.write_text(LOCAL_DEFAULTS)
    result = run_cli("import-hermes", str(path))
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["sandbox"]["backend"] == "bwrap"
    assert "mapped:" in result.stderr
    missing = run_cli("import-hermes", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 125 and "cannot read the Hermes config" in missing.stderr


def gateway_with(**terminal: object) -> dict:
    data = yaml.safe_load(DOCKER_GATEWAY)
    data["terminal"].update(terminal)
    return data


def test_limits_in_extra_args_become_the_settings() -> None:
    """Hermes adds docker_extra_args last: `--pids-limit 128` is what it ran with."""
    data = gateway_with(
        docker_extra_args=["--pids-limit", "128", "--memory=2g", "--cpus", "0.5"],
        container_memory=5120,
    )
    result = import_hermes(data)
    sb = config_from_dict(result.config).sandbox
    assert (sb.pids, sb.memory_mb, sb.docker.cpus) == (128, 2048, 0.5)
    mapped = "\n".join(result.mapped)
    assert "--pids-limit 128 -> sandbox.pids: 128" in mapped
    assert not any("pids-limit" in line for line in result.stricter)


@pytest.mark.parametrize(
    "extra, cpus",
    [
        (["--cpu-quota", "50000"], 0.5),  # per docker's default period of 100000 µs
        (["--cpu-period=200000", "--cpu-quota=50000"], 0.25),
        (["--cpuset-cpus", "0"], 1.0),  # one core
        (["--cpuset-cpus=0-3,6"], 2.0),  # five cores, and container_cpu: 2 also holds
    ],
)
def test_cpu_limits_in_extra_args_become_the_setting(extra: list[str], cpus: float) -> None:
    """Issue 16, new variants: CPU limits other than --cpus were dropped and reported as
    "made stricter" while the result allowed container_cpu's 2 cores."""
    result = import_hermes(gateway_with(docker_extra_args=extra, container_cpu=2))
    assert config_from_dict(result.config).sandbox.docker.cpus == cpus
    assert not any("cpu" in line for line in result.stricter), result.stricter
    assert import_hermes(gateway_with(container_cpu=2)).config["sandbox"]["docker"]["cpus"] == 2


def test_container_disk_zero_is_no_limit_on_both_sides() -> None:
    result = import_hermes(gateway_with(container_disk=0))
    assert config_from_dict(result.config).sandbox.docker.disk_mb is None
    line = next(line for line in result.mapped if "container_disk" in line)
    assert "not set (no limit either)" in line
    memory = import_hermes(gateway_with(container_memory=0))
    line = next(line for line in memory.stricter if "container_memory" in line)
    assert "sandbox.memory_mb: 4096" in line  # the default that really applies


@pytest.mark.parametrize(
    "data, where",
    [
        ({"approvals": {"deny": "rm -rf *"}}, "approvals.deny: expected a list, got a string"),
        ({"toolsets": "terminal"}, "toolsets: expected a list, got a string"),
        ({"platform_toolsets": {"cli": "web"}}, "platform_toolsets.cli: expected a list"),
        ({"terminal": {"docker_volumes": "/a:/b"}}, "terminal.docker_volumes: expected a list"),
        ({"terminal": {"docker_forward_env": "HOME"}}, "docker_forward_env: expected a list"),
        ({"terminal": {"timeout": "soon"}}, "terminal.timeout: expected a number"),
        ({"terminal": {"container_persistent": "no"}}, "container_persistent: expected true"),
        ({"command_allowlist": "rm"}, "command_allowlist: expected a list"),
        ({"security": {"website_blocklist": {"domains": "x.com"}}}, "domains: expected a list"),
    ],
)
def test_wrong_types_are_errors(data: dict, where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        import_hermes(data)


@pytest.mark.parametrize(
    "data, where",
    [
        # Issue 16, new variants: entries of a list, infinities, section names.
        ({"approvals": {"deny": ["rm -rf *", None]}}, r"approvals\.deny\[1\]: .*empty value"),
        ({"terminal": {"docker_extra_args": [["--privileged"]]}}, r"docker_extra_args\[0\]"),
        ({"terminal": {"docker_volumes": [{"/": "/host"}]}}, r"docker_volumes\[0\]: .*mapping"),
        ({"security": {"website_blocklist": {"domains": [{"a": 1}]}}}, r"domains\[0\]"),
        ({"terminal": {"timeout": float("inf")}}, "terminal.timeout: must be a finite number"),
        ({"terminal": {"container_cpu": float("nan")}}, "container_cpu: must be a finite"),
        ({1: {"a": 1}}, "a section name must be a word"),
    ],
)
def test_wrong_types_inside_values_are_errors(data: dict, where: str) -> None:
    assert import_hermes({"terminal": {"docker_extra_args": ["--pids-limit", 64]}})  # control
    with pytest.raises(ConfigError, match=where):
        import_hermes(data)


def test_negative_numbers_are_explained() -> None:
    with pytest.raises(
        ConfigError, match=r"container_memory: must be 0 \(no limit\) or more, got -5"
    ):
        import_hermes({"terminal": {"container_memory": -5}})
    with pytest.raises(ConfigError, match=r"terminal\.timeout: must be greater than 0, got -1"):
        import_hermes({"terminal": {"timeout": -1}})


def test_what_agentvisor_would_refuse_is_flagged_at_import() -> None:
    data = gateway_with(
        docker_volumes=["/etc:/hostetc", "/srv/data:/data:ro"],
        docker_extra_args=["-v", "/:/host", "--cap-add", "SETUID"],
    )
    result = import_hermes(data)
    refused = "\n".join(result.refused)
    assert "'/etc:/hostetc' left out: /etc is a system directory" in refused
    assert "-v /:/host left out: / is a system directory" in refused
    config = config_from_dict(result.config)
    assert config.sandbox.mounts == ["/srv/data:/data:ro"]
    assert config.sandbox.docker.extra_args == ["--cap-add", "SETUID"]
    assert not any("/etc" in line or "/:/host" in line for line in result.mapped)


def test_every_input_key_is_reported(tmp_path: Path, isolated_home: Path) -> None:
    data = yaml.safe_load(DOCKER_GATEWAY)
    data["terminal"]["mystery_option"] = 1
    data["approvals"]["something_new"] = True
    env = {"HERMES_WRITE_SAFE_ROOT": "/srv", "TELEGRAM_ALLOWED_USERS": "1", "HTTPS_PROXY": "x"}
    result = import_hermes(data, env=env)
    for section in ("terminal", "approvals", "security"):
        for key in data[section]:
            assert result.reported(f"{section}.{key}"), f"{section}.{key}"
    unmapped = "\n".join(result.unmapped)
    assert ".env TELEGRAM_ALLOWED_USERS" in unmapped and ".env HTTPS_PROXY" in unmapped
    assert "terminal.mystery_option: no agentvisor equivalent" in unmapped
    hermes = isolated_home / ".hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text(DOCKER_GATEWAY)
    (hermes / ".env").write_text("TELEGRAM_ALLOWED_USERS=42\nHTTPS_PROXY=http://p:3128\n")
    cli = run_cli("import-hermes", env={"HOME": str(isolated_home), "PATH": "/usr/bin:/bin"})
    assert ".env TELEGRAM_ALLOWED_USERS" in cli.stderr and "http://p:3128" not in cli.stderr


def test_imported_deny_globs_ignore_case_as_in_hermes(tmp_path: Path) -> None:
    from agentvisor.actions import Action, Context
    from agentvisor.policy import PolicyEngine

    result = import_hermes({"approvals": {"deny": ["rm -rf *", "git push --force*"]}})
    engine = PolicyEngine.from_config(config_from_dict(result.config))
    context = Context(tool="exec", workspace=str(tmp_path))
    for command in ("RM -RF build", "rm -rf build", "Git Push --FORCE origin"):
        assert engine.decide(Action("exec", command), context).verdict == "deny", command
    assert engine.decide(Action("exec", "rm -r build"), context).verdict == "allow"  # control


@pytest.mark.parametrize(
    "dotenv, error",
    [
        (b"HERMES_WRITE_SAFE_ROOT=/srv\nHERMES_WRITE_SAFE_ROOT=/\n", "line 2: HERMES_WRITE_SAFE"),
        (b"TELEGRAM_ALLOWED_USERS=\xe9\xff\n", "not UTF-8"),
    ],
)
def test_a_dotenv_that_cannot_be_read_one_way_stops_the_import(
    isolated_home: Path, dotenv: bytes, error: str
) -> None:
    """Issue 16, new variants: a .env that was not UTF-8 was skipped without a word (its
    keys in no list), and a key set twice kept its last value without a word."""
    hermes = isolated_home / ".hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text(DOCKER_GATEWAY)
    env = {"HOME": str(isolated_home), "PATH": "/usr/bin:/bin"}
    (hermes / ".env").write_bytes(b"TELEGRAM_ALLOWED_USERS=42\n")
    assert run_cli("import-hermes", env=env).returncode == 0  # control
    (hermes / ".env").write_bytes(dotenv)
    r = run_cli("import-hermes", env=env)
    assert r.returncode != 0 and error in r.stderr and "Traceback" not in r.stderr, r.stderr
