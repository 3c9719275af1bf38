"""A project file (agentvisor.yaml in the workspace) may only narrow the operator's config,
unless the operator trusted that exact content with `agentvisor trust`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentvisor.config import config_from_dict, load_config
from agentvisor.config.narrowing import widenings
from agentvisor.errors import ConfigError
from tests.conftest import requires_bwrap, run_cli

WIDENING = {
    "backend": "sandbox:\n  backend: local\n",
    "home mount": "sandbox:\n  mounts: ['~/:/host-home:rw']\n",
}


@pytest.fixture
def project(tmp_path: Path) -> dict[str, object]:
    """A workspace with a subfolder ``app``, and an operator whose home is elsewhere."""
    home = tmp_path / "home"
    home.mkdir()
    app = tmp_path / "ws" / "app"
    app.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "AGENTVISOR_NO_GATEWAY": "1"}
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(var, None)
    return {"app": app, "env": env, "home": home}


@requires_bwrap
@pytest.mark.parametrize("what", sorted(WIDENING))
def test_a_planted_file_that_widens_is_refused(project, what):
    app, env = project["app"], project["env"]
    control = run_cli("exec", "--", "true", cwd=app, env=env)
    assert control.returncode == 0, control.stderr  # the run works without the file
    planted = app / "agentvisor.yaml"
    planted.write_text(WIDENING[what])
    r = run_cli("exec", "--", "true", cwd=app, env=env)
    assert r.returncode != 0
    key = "sandbox.backend" if what == "backend" else "sandbox.mounts"
    assert str(planted) in r.stderr and key in r.stderr, r.stderr
    assert "agentvisor trust" in r.stderr and "Traceback" not in r.stderr


@requires_bwrap
def test_a_narrowing_file_applies(project):
    app, env = project["app"], project["env"]
    (app.parent / "agentvisor.yaml").write_text(  # found from a subfolder too
        "sandbox: {pids: 64, memory_mb: 1024}\n"
        "rules: [{decision: deny, kind: exec, pattern: 'curl *'}]\n"
        "toolsets: [web]\n"
    )
    assert run_cli("exec", "--", "true", cwd=app, env=env).returncode == 0
    denied = run_cli("check", "exec", "curl example.com", cwd=app, env=env)
    assert '"decision": "deny"' in denied.stdout and "rules[0]" in denied.stdout
    config = load_config(cwd=str(app), environ=env)
    assert (config.sandbox.pids, config.sandbox.memory_mb) == (64, 1024)


@requires_bwrap
def test_a_trusted_file_applies_until_it_changes(project):
    app, env = project["app"], project["env"]
    planted = app / "agentvisor.yaml"
    planted.write_text(WIDENING["backend"])
    trusted = run_cli("trust", "agentvisor.yaml", cwd=app, env=env)
    assert trusted.returncode == 0, trusted.stderr
    assert str(planted) in run_cli("trust", "--list", cwd=app, env=env).stdout
    ran = run_cli("exec", "--", "true", cwd=app, env=env)
    assert ran.returncode == 0 and "WITHOUT isolation" in ran.stderr  # local, as trusted
    planted.write_text(WIDENING["backend"] + "# changed\n")
    assert "changed" in run_cli("trust", "--list", cwd=app, env=env).stdout
    again = run_cli("exec", "--", "true", cwd=app, env=env)
    assert again.returncode != 0 and "sandbox.backend" in again.stderr
    run_cli("trust", "agentvisor.yaml", cwd=app, env=env)
    assert run_cli("exec", "--", "true", cwd=app, env=env).returncode == 0
    assert run_cli("trust", "--revoke", "agentvisor.yaml", cwd=app, env=env).returncode == 0
    assert run_cli("exec", "--", "true", cwd=app, env=env).returncode != 0


def test_only_a_valid_config_is_trusted(project):
    app, env = project["app"], project["env"]
    (app / "agentvisor.yaml").write_text("sandbox: {pidz: 1}\n")
    r = run_cli("trust", "agentvisor.yaml", cwd=app, env=env)
    assert r.returncode != 0 and "pidz" in r.stderr
    assert "no trusted" in run_cli("trust", "--list", cwd=app, env=env).stdout


def test_the_operator_config_is_the_baseline(project, monkeypatch):
    """Against the operator's own file: raising its lowered limit widens, though the
    value is below the built-in default."""
    app, home = project["app"], project["home"]
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    operator = home / ".config" / "agentvisor" / "config.yaml"
    operator.parent.mkdir(parents=True)
    operator.write_text(
        "sandbox: {pids: 32, protected_paths: [/srv/keys]}\n"
        "rules: [{decision: deny, kind: exec, pattern: 'git push *'}]\n"
    )
    (app / "agentvisor.yaml").write_text("sandbox: {pids: 100}\n")
    with pytest.raises(ConfigError, match=r"sandbox\.pids: raises the limit \(32 -> 100\)"):
        load_config(cwd=str(app))
    (app / "agentvisor.yaml").write_text(
        "sandbox: {protected_paths: [/srv/more]}\n"
        "rules: [{decision: ask, kind: exec, pattern: 'git *'}]\n"
    )
    config = load_config(cwd=str(app))
    assert config.sandbox.protected_paths == ["/srv/keys", "/srv/more"]  # added to, not replaced
    assert [r.decision for r in config.rules] == ["deny", "ask"]
    assert config.source == str(operator)
    explicit = home / "explicit.yaml"
    explicit.write_text("sandbox: {pids: 8}\n")
    assert load_config(explicit, cwd=str(app)).sandbox.pids == 8  # --config: no project file


def widens(operator: dict, merged: dict) -> list[str]:
    return widenings(config_from_dict(operator), config_from_dict(merged))


@pytest.mark.parametrize(
    "operator, merged, key",
    [
        ({}, {"sandbox": {"network": "proxy"}}, "sandbox.network"),
        ({}, {"sandbox": {"cpu_seconds": 10}}, None),  # a limit where there was none
        ({"sandbox": {"cpu_seconds": 10}}, {}, "sandbox.cpu_seconds"),  # no limit: wider
        ({}, {"sandbox": {"env_passthrough": ["X"]}}, "sandbox.env_passthrough"),
        ({}, {"sandbox": {"env_passthrough_secrets": ["X"]}}, "sandbox.env_passthrough_secrets"),
        ({}, {"sandbox": {"allow_unenforced_limits": True}}, "sandbox.allow_unenforced_limits"),
        ({}, {"sandbox": {"workspace": "/"}}, "sandbox.workspace"),
        ({}, {"sandbox": {"docker": {"read_only_root": False}}}, "sandbox.docker.read_only_root"),
        ({}, {"approvals": {"mode": "off"}}, "approvals.mode"),
        ({"approvals": {"mode": "off"}}, {"approvals": {"mode": "manual"}}, None),
        ({}, {"policy": {"categories": {"power": False}}}, "policy.categories.power"),
        ({}, {"policy": {"defaults": {"write": "allow"}}}, "policy.defaults.write"),
        ({}, {"policy": {"defaults": {"exec": "ask"}}}, None),
        ({}, {"files": {"write_roots": ["/"]}}, "files.write_roots"),
        ({"network": {"block": ["10.9.0.0/16"]}}, {}, "network.block"),
        ({}, {"network": {"block": ["10.9.0.0/16"]}}, None),
        ({}, {"gateway": {"port": 9999}}, "gateway.port"),
        ({}, {"audit": {"retention_days": 1}}, "audit.retention_days"),
        ({}, {"secrets": [{"name": "A", "env": "A", "hosts": ["h"]}]}, "secrets"),
        ({}, {"toolsets": ["all"]}, "toolsets"),
        ({}, {"toolsets": ["file", "web"]}, None),  # both within the default "debugging"
        ({}, {"toolsets": ["http"]}, "toolsets"),
        ({}, {"rules": [{"decision": "allow", "kind": "exec", "pattern": "x"}]}, "rules"),
        ({}, {"rules": [{"decision": "deny", "kind": "exec", "pattern": "x"}]}, None),
        ({"rules": [{"decision": "deny", "kind": "exec", "pattern": "x"}]}, {}, "rules"),
    ],
)
def test_what_widens(operator, merged, key):
    found = widens(operator, merged)
    if key is None:
        assert found == []
    else:
        assert [line.split(":")[0] for line in found] == [key], found


def test_every_key_says_how_it_widens_or_is_fixed():
    """A key the schema says nothing about may not change at all (fail closed)."""
    assert widens({}, {"web_search": {"max_results": 3}}) == [
        "web_search.max_results: may not be changed by a project file (10 -> 3)"
    ]


@requires_bwrap
@pytest.mark.parametrize("entry", ["../outside.txt", "a/../../outside.txt", "/etc/x", "./a"])
def test_a_readonly_path_outside_the_workspace_is_refused(project, entry):
    """``sandbox.readonly_paths`` only restricts, so a project may add entries; but each
    entry's parent directories become writable binds in the sandbox and a missing entry a
    stand-in made on the host: ``../`` would reach out of the workspace."""
    app, env = project["app"], project["env"]
    (app / "agentvisor.yaml").write_text("sandbox:\n  readonly_paths: ['build/']\n")
    assert run_cli("exec", "--", "true", cwd=app, env=env).returncode == 0  # control
    (app / "agentvisor.yaml").write_text(f"sandbox:\n  readonly_paths: ['{entry}']\n")
    r = run_cli("exec", "--", "true", cwd=app, env=env)
    assert r.returncode != 0
    assert "sandbox.readonly_paths[0]" in r.stderr and "inside the workspace" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (app.parent / "outside.txt").exists()


@pytest.mark.parametrize(
    "rule, widens",
    [
        ("{decision: ask, kind: exec, pattern: 'curl *'}", True),  # the operator denies exec
        ("{decision: ask, kind: fetch, pattern: '*'}", True),  # the proxy denies fetches
        ("{decision: ask, kind: read, pattern: '*.txt'}", False),  # reads are allowed: narrows
        ("{decision: deny, kind: exec, pattern: 'curl *'}", False),
    ],
)
def test_an_ask_rule_over_a_denial_is_a_widening(project, rule, widens):
    """deny > ask > allow among rules, but an ask rule outranks the kind's default: over a
    default of deny it makes a question of a refusal."""
    home, app, env = project["home"], project["app"], project["env"]
    operator = home / ".config" / "agentvisor" / "config.yaml"
    operator.parent.mkdir(parents=True)
    operator.write_text("policy:\n  defaults: {exec: deny}\n")
    (app / "agentvisor.yaml").write_text(f"rules:\n  - {rule}\n")
    if not widens:
        load_config(cwd=str(app), environ=env)
        return
    with pytest.raises(ConfigError, match="turns a denial into a question"):
        load_config(cwd=str(app), environ=env)
