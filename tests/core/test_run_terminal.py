"""`agentvisor run` on a terminal: the harness draws on a pseudo-terminal relayed to the
caller's (a TUI, unfiltered), and whatever modes and size it (or a command it ran) left,
the caller gets its own back.
"""

from __future__ import annotations

import os

from tests.conftest import AGENTVISOR, requires_bwrap
from tests.core.test_terminal import HOSTILE, in_a_terminal

pytestmark = requires_bwrap


def test_the_terminal_comes_back_after_a_harness(tmp_path, isolated_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = dict(os.environ, HOME=str(isolated_home), AGENTVISOR_NO_GATEWAY="1")
    argv = [AGENTVISOR, "run", "--profile", "generic", "--", "sh", "-c", HOSTILE]
    output, echo, size = in_a_terminal(argv, env, ws)
    assert b"stdout-is-a-terminal" in output, output  # the harness had the terminal
    assert (echo, size) == (True, (24, 80))


def test_control_a_harness_does_change_the_terminal(tmp_path):
    """The same command as the harness, without agentvisor, leaves echo off and 5x20."""
    _, echo, size = in_a_terminal(["sh", "-c", HOSTILE], dict(os.environ), tmp_path)
    assert (echo, size) == (False, (5, 20))
