"""Issue 13.6, terminal state: a sequence that changes state outliving the command, that
makes the terminal type into the input, or that acts beyond the text is dropped, or kept
and its state put back at the end of the run. Every class goes through the real filter of
a real `agentvisor exec` on a real pseudo-terminal; the control shows the same bytes reach
a terminal without agentvisor."""

from __future__ import annotations

import os

import pytest

from tests.conftest import AGENTVISOR, requires_bwrap
from tests.core.test_terminal_handles import Terminal

# Dropped: what it would do, and the sequence.
DROPPED = {
    "RIS resets the whole terminal": b"\x1bc",
    "S8C1T makes it type 8-bit controls into the input": b"\x1b G",
    "ANSI conformance level switches character sets": b"\x1b L",
    "G2 and G3 character sets": b"\x1b*0\x1b+0",
    "a 96-character set": b"\x1b-A",
    "leaving UTF-8 (ESC % @)": b"\x1b%@",
    "locking shifts": b"\x1bn\x1bo\x1b|\x1b}\x1b~",
    "single shifts": b"\x1bN\x1bO",
    "a tab stop set for good (HTS)": b"\x1bH",
    "every tab stop cleared (TBC)": b"\x1b[3g",
    "DECSTR soft reset": b"\x1b[!p",
    "REP with a count only a terminal's load needs": b"\x1b[999999b",
    "HP memory lock": b"\x1bl",
    "DECID, which the terminal answers": b"\x1bZ",
    "window title (OSC 2)": b"\x1b]2;title\x07",
}
# Kept (they draw text), their state put back at the end.
KEPT = {
    "line-drawing set in G0": b"\x1b(0",
    "shift out to G1": b"\x0e",
    "application keypad": b"\x1b=",
    "insert mode": b"\x1b[4h",
    "newline mode (Return types CR LF)": b"\x1b[20h",
    "cursor style (DECSCUSR)": b"\x1b[5 q",
    "scroll region": b"\x1b[2;10r",
    "colours": b"\x1b[31m",
    "bracketed paste": b"\x1b[?2004h",
    "mouse reports": b"\x1b[?1000;1006h",
    "alternate screen": b"\x1b[?1049h",
    "a short REP": b"x\x1b[5b",
}
PUT_BACK = (
    b"\x1b[?1000l\x1b[?1006l\x1b[?1049l\x1b[?2004l"  # DEC modes, in number order
    b"\x1b7\x1b[r\x1b8"  # the scroll region, the cursor kept where it is
    b"\x1b(B\x0f"  # ASCII in G0, G0 in use
    b"\x1b>"  # numeric keypad
    b"\x1b[4l\x1b[20l"  # insert and newline modes off
    b"\x1b[0 q"  # the terminal's own cursor style
    b"\x1b[m"  # colours
)


def printf_argv(sequences: dict[str, bytes]) -> list[str]:
    """sh -c printf of every sequence between markers (octal escapes: printf's format)."""
    body = "".join(
        f"[{n}]" + "".join(f"\\{byte:03o}" for byte in sequence)
        for n, sequence in enumerate(sequences.values())
    )
    return ["sh", "-c", f"printf '{body}[end]'"]


def shown(argv: list[str], env: dict[str, str], cwd) -> bytes:
    terminal = Terminal(owner=os.getuid())
    try:
        terminal.start(argv, env, cwd)
        terminal.read_until(b"[end]")
        return terminal.finish()
    finally:
        terminal.close()


@pytest.fixture
def exec_env(tmp_path, isolated_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    return dict(os.environ, HOME=str(isolated_home), AGENTVISOR_NO_GATEWAY="1"), ws


@requires_bwrap
def test_state_changing_sequences_are_dropped_or_put_back(exec_env):
    env, ws = exec_env
    sequences = DROPPED | KEPT
    output = shown([AGENTVISOR, "exec", "--", *printf_argv(sequences)], env, ws)
    assert [name for name, seq in DROPPED.items() if seq in output] == [], output
    assert [name for name, seq in KEPT.items() if seq not in output] == [], output
    assert output.endswith(b"[end]" + PUT_BACK), output
    # --raw-output passes every byte and puts nothing back.
    raw = shown([AGENTVISOR, "exec", "--raw-output", "--", *printf_argv(sequences)], env, ws)
    assert [name for name, seq in sequences.items() if seq not in raw] == []
    assert raw.endswith(b"[end]")


@requires_bwrap
def test_control_the_same_bytes_reach_a_terminal_without_agentvisor(exec_env):
    env, ws = exec_env
    output = shown(printf_argv(DROPPED | KEPT), env, ws)
    assert [name for name, seq in (DROPPED | KEPT).items() if seq not in output] == []
    assert output.endswith(b"[end]")
