"""Credential reads judged against what the command's sandbox can actually see."""

from __future__ import annotations

import pytest

from agentvisor.actions import Action, Context
from agentvisor.config import config_from_dict
from agentvisor.policy import PolicyEngine


def decide(command: str, workspace: str, backend: str = "bwrap", home: str = "/home/u") -> str:
    config = config_from_dict({"sandbox": {"backend": backend}})
    engine = PolicyEngine.from_config(config, grants=None, home=home)
    return engine.decide(Action("exec", command), Context(workspace=workspace)).verdict


@pytest.mark.parametrize(
    "command",
    [
        "python3 ./probe.py ~/.ssh/id_rsa MARK",
        "sh ./probe.sh /home/u/.aws/credentials",
        "./tool ~/.netrc",
        "python3 probe.py /etc/shadow",
    ],
)
def test_a_script_given_a_path_the_sandbox_hides_runs(command):
    assert decide(command, "/work/ws") == "allow"


@pytest.mark.parametrize("command", ["python3 ./probe.py ~/.ssh/id_rsa MARK", "./tool ~/.netrc"])
def test_without_isolation_the_same_script_asks(command):
    assert decide(command, "/work/ws", backend="local") == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "cat ~/.ssh/id_rsa",
        "base64 ~/.aws/credentials",
        "cp ~/.netrc /tmp/x",
        "head -c 64 /etc/shadow",
    ],
)
def test_tools_that_read_their_operands_still_ask(command):
    assert decide(command, "/work/ws") == "ask"


def test_a_credential_file_the_sandbox_shows_still_asks():
    assert decide("python3 ./probe.py .env", "/work/ws") == "ask"
    assert decide("python3 ./probe.py /work/ws/.env.local", "/work/ws") == "ask"


def test_workspace_that_is_home_still_hides_protected_paths():
    assert decide("python3 ./probe.py ~/.ssh/id_rsa", "/home/u") == "allow"
