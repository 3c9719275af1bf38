"""No secrets: a small allowlisted environment, credential-like names never passed silently."""

from __future__ import annotations

import pytest

from agentvisor.sandbox.env import build_env, looks_like_credential
from tests.conftest import requires_bwrap
from tests.sandbox.helpers import sandbox, text

pytestmark = requires_bwrap

SECRET = "sk-test-0123456789abcdef"


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    monkeypatch.setenv("PROJECT_NAME", "demo")


def test_caller_environment_not_inherited(workspace, secret_env):
    out = text(sandbox(workspace).run(["env"]))
    assert SECRET not in out
    assert "PROJECT_NAME" not in out
    assert "PATH=" in out and "HOME=" in out


def test_bwrap_pid1_does_not_carry_the_environment(workspace, secret_env):
    probe = (
        "import os\nfor p in filter(str.isdigit, os.listdir('/proc')):\n"
        " try: print(open(f'/proc/{p}/environ','rb').read())\n except OSError: pass"
    )
    out = text(sandbox(workspace).run(["python3", "-c", probe]))
    assert SECRET not in out
    assert "PATH=" in out  # control: the probe did read environments


def test_passthrough_keeps_plain_names_and_drops_credentials(workspace, secret_env):
    box = sandbox(workspace, env_passthrough=["PROJECT_NAME", "OPENAI_API_KEY"])
    out = text(box.run(["env"]))
    assert "PROJECT_NAME=demo" in out
    assert SECRET not in out
    assert any("OPENAI_API_KEY" in w and "credential" in w for w in box.warnings)


def test_explicit_secret_passthrough_forwards_with_a_warning(workspace, secret_env):
    box = sandbox(workspace, env_passthrough_secrets=["MY_SERVICE_TOKEN"])
    assert f"MY_SERVICE_TOKEN={SECRET}" in text(box.run(["env"]))
    assert any("MY_SERVICE_TOKEN" in w for w in box.warnings)


@pytest.mark.parametrize(
    "name",
    [
        "GITHUB_TOKEN",
        "aws_secret_access_key",
        "DB_PASSWORD",
        "SENTRY_DSN",
        "SLACK_WEBHOOK_URL",
        "GPG_PRIVATE",
        "X_AUTH",
        "NPM_CREDS",
        "MYPASSWD",
    ],
)
def test_credential_names(name):
    assert looks_like_credential(name)


@pytest.mark.parametrize("name", ["PATH", "LANG", "PROJECT_NAME", "EDITOR", "PYTHONPATH"])
def test_plain_names(name):
    assert not looks_like_credential(name)


def test_build_env_is_small():
    env = build_env({"HOME": "/root", "LANG": "C.UTF-8", "SSH_AUTH_SOCK": "/run/x"}, home="/h")
    assert env.env["HOME"] == "/h"
    assert "SSH_AUTH_SOCK" not in env.env
    assert env.env["LANG"] == "C.UTF-8"
