"""agentvisor import-hermes on realistic Hermes configs (keys from Hermes' own docs)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from agentvisor.config import config_from_dict
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
    assert ("deny", "exec", "git push --force* *") in rules
    assert ("deny", "exec", "dd if=* of=/dev/* *") in rules
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
