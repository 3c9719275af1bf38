"""Issue 16: what a person reads when asked, and the hints that say how to allow."""

from __future__ import annotations

import shlex

import pytest

from agentvisor.actions import Action, Context
from agentvisor.config import config_from_dict
from agentvisor.policy import PolicyEngine
from agentvisor.state.asks import ApprovalRequest, render


def ask(argv, session=None, config_files=("/etc/agentvisor/config.yaml",)):
    action = Action("exec", shlex.join(argv), argv=tuple(argv))
    context = Context(tool="terminal", session=session)
    decision = PolicyEngine.from_config(config_from_dict({})).decide(action, context)
    assert decision.verdict == "ask" and decision.patterns  # control: a liftable ask
    return ApprovalRequest(action, context, decision, config_files)


def test_the_prompt_shows_the_command_with_its_quoting():
    text = render(ask(["bash", "-c", "git push --force origin main"]))
    assert "exec: bash -c 'git push --force origin main'\n" in text


@pytest.mark.parametrize(
    "session, files, offered",
    [
        (None, ("/c.yaml",), "'always' would allow"),
        ("s1", (), "'session' would allow"),
        ("s1", ("/c.yaml",), "'session' and 'always' would allow"),
        (None, (), None),
    ],
)
def test_the_prompt_names_only_the_answers_it_offers(session, files, offered):
    request = ask(["git", "push", "--force", "origin", "main"], session, files)
    text = render(request)
    lines = [line for line in text.splitlines() if "would allow" in line]
    assert lines == ([f"  {offered}: git push --force origin main"] if offered else [])
    for choice in ("session", "always"):
        assert (f"'{choice}'" in text) == (choice in request.choices)
