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


def suggested_grant(hint):
    """The `agentvisor grant ...` command line a hint suggests, as an argv."""
    command = hint.split("`")[1]
    assert command.startswith("agentvisor grant ")
    return shlex.split(command)


@pytest.mark.parametrize(
    "argv",
    [
        ["git", "reset", "--hard", "HEAD~3"],  # the pattern holds quotes: 'HEAD~3'
        ["git", "push", "--force", "origin", "main"],
        ["sh", "-c", "git reset --hard 'HEAD~3'"],
    ],
)
def test_hints_suggest_a_grant_that_reads_well_and_works(argv, tmp_path):
    import json
    import os

    from tests.conftest import run_cli

    hint = ask(argv).decision.hint
    command = suggested_grant(hint)
    assert "'\"'\"'" not in hint.split("`")[1]  # no quotes nested in quotes
    env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"))
    check = ["check", "exec", "--", *argv]
    assert json.loads(run_cli(*check, env=env, cwd=tmp_path).stdout)["decision"] == "ask"
    r = run_cli(*command[1:], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    after = json.loads(run_cli(*check, env=env, cwd=tmp_path).stdout)
    assert after["decision"] == "allow" and after["rule"].startswith("grant:"), after


def test_several_words_make_a_pattern_only_for_exec(tmp_path):
    import os

    from tests.conftest import run_cli

    env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"))
    r = run_cli("grant", "read", "a", "b", env=env, cwd=tmp_path)
    assert r.returncode == 2 and "one argument" in r.stderr
    r = run_cli("grant", "exec", "--", "rm", "-rf", "build dir", env=env, cwd=tmp_path)
    assert r.returncode == 0 and "allow exec \"rm -rf 'build dir'\"" in r.stdout


SPOOF = "\x1b[2K\x1b[1A\x1b[2K\r  exec: ls\x1b]52;c;cm0gLXJm\x07\x9b2J\u202e"


def test_the_prompt_shows_control_characters_and_never_sends_them():
    """An agent's command that erases the prompt's lines and writes a harmless one in their
    place (and sets the clipboard) is shown with its escapes written out."""
    request = ask(["bash", "-c", f"git push --force origin main #{SPOOF}"])
    text = render(request)
    assert not any(c in text for c in "\x1b\x07\r\x9b\u202e"), repr(text)
    assert "#\\x1b[2K\\x1b[1A\\x1b[2K\\x0d  exec: ls\\x1b]52;c;cm0gLXJm\\x07\\x9b2J\\u202e'" in text
    assert "exec: bash -c 'git push --force origin main #" in text
    # Control: the command itself holds the raw characters a terminal acts on.
    assert "\x1b" in request.action.target and "\x1b" in shlex.join(request.action.argv)
