"""Issue 16, new variants: bad input to any CLI command is a one-line error naming the
command, never a traceback. Real CLI runs; each case has a control that works."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import AGENTVISOR

LONG = "a/" * 5000  # a path the kernel refuses: "File name too long"
NOT_UTF8 = b"\xff\xfe"  # an argument that is not UTF-8 (Python holds it as surrogates)
HUGE = "9" * 23

BAD = {
    "exec timeout too big": ["exec", "--timeout", HUGE, "--", "true"],
    "exec timeout nan": ["exec", "--timeout", "nan", "--", "true"],
    "exec workspace too long": ["exec", "--workspace", LONG, "--", "true"],
    "exec config too long": ["exec", "--config", LONG, "--", "true"],
    "grant for too long": ["grant", "exec", "ls", "--for", HUGE + "d"],
    "revoke not utf-8": ["revoke", NOT_UTF8],
    "grants config too long": ["grants", "--config", LONG],
    "log limit too big": ["log", "--limit", HUGE],
    "log session not utf-8": ["log", "--session", NOT_UTF8],
    "tool install too long": ["tool", "install", LONG],
    "doctor config too long": ["doctor", "--config", LONG],
    "serve port too big": ["serve", "--port", "99999999"],
    "serve port negative": ["serve", "--port", "-1"],
    "mcp workspace too long": ["mcp", "--workspace", LONG],
    "run profile too long": ["run", "--profile", LONG, "--", "true"],
}


def run(args, home):
    env = dict(os.environ, HOME=str(home), XDG_STATE_HOME=str(home / "state"))
    argv = [AGENTVISOR.encode(), *(a if isinstance(a, bytes) else a.encode() for a in args)]
    return subprocess.run(
        argv, env=env, cwd=home, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )


@pytest.mark.parametrize("name", BAD)
def test_bad_input_is_a_one_line_error(tmp_path, name):
    r = run(BAD[name], tmp_path)
    err = r.stderr.decode(errors="replace")
    assert r.returncode not in (0, -6) and "Traceback" not in err, err[-1500:]
    command = BAD[name][0]
    assert f"agentvisor {command}" in err, err


def test_controls_work(tmp_path):
    assert run(["grant", "exec", "ls", "--for", "5m"], tmp_path).returncode == 0
    assert run(["log", "--limit", "5"], tmp_path).returncode == 0
    assert run(["revoke", "g-00000000"], tmp_path).returncode == 2  # a clean "no grant"


def test_ctrl_c_while_a_command_is_set_up_ends_quietly(monkeypatch, capsys):
    """Ctrl-C before the handler runs (importing the subcommand, building the parser)."""
    from agentvisor.frontends import cli

    def interrupted(only=None):
        raise KeyboardInterrupt

    assert cli.main(["check", "exec", "ls"]) == 0  # control
    capsys.readouterr()
    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["check", "exec", "ls"]) == 130
    assert capsys.readouterr().err == ""
