"""Issue 13.6: `agentvisor exec` on a terminal, in a real pseudo-terminal.

A command may not leave the caller's terminal changed (modes, window size), nor make it
act beyond showing text (title, clipboard, window operations, answers typed into the
input), unless the caller asks for raw output."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import time

import pytest

from agentvisor.exec.terminal import OutputFilter
from tests.conftest import AGENTVISOR, requires_bwrap

HOSTILE = (
    r"printf '\033]0;pwned-title\007\033]52;c;cHduZWQ=\007\033[6n\033[c\033[8;5;20t"
    r"\033P$qm\033\\\033_Gimage\033\\\033[31mred\033[0m\n'; "
    r"[ -t 1 ] && echo stdout-is-a-terminal; stty -echo; stty rows 5 cols 20; "
    # stdin is the same terminal, usually open for writing too: past the output filter
    r"{ printf '\033]2;via-stdin\007' >&0; } 2>/dev/null; true"
)
ACTING = (
    b"\x1b]",
    b"pwned-title",
    b"\x1b[6n",
    b"\x1b[c",
    b"\x1b[8;5;20t",
    b"\x1bP",
    b"\x1b_",
    b"via-stdin",
)


def in_a_terminal(argv, env, cwd):
    """Run ``argv`` with a fresh pseudo-terminal (24x80, echo on) as stdin, stdout and
    stderr; its output, and the terminal's echo flag and size afterwards."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("4H", 24, 80, 0, 0))
    try:
        proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
        )
        output = bytearray()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.3)
            if ready:
                output += os.read(master, 65536)
            elif proc.poll() is not None:
                break
        assert proc.wait(10) == 0, bytes(output)
        echo = bool(termios.tcgetattr(slave)[3] & termios.ECHO)
        rows, cols, _, _ = struct.unpack("4H", fcntl.ioctl(slave, termios.TIOCGWINSZ, bytes(8)))
        return bytes(output), echo, (rows, cols)
    finally:
        os.close(master)
        os.close(slave)


@pytest.fixture
def caller(tmp_path, isolated_home):
    """How a user runs `agentvisor exec`: in-process, or through the exec helper."""
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    ws = tmp_path / "ws"
    ws.mkdir()
    yield env, ws
    subprocess.run([AGENTVISOR, "exec-helper", "--stop"], env=env, capture_output=True, timeout=30)


def through(path, env, ws):
    if path == "in-process":
        return dict(env, AGENTVISOR_NO_GATEWAY="1")
    subprocess.run([AGENTVISOR, "exec", "--", "true"], env=env, cwd=ws, check=True, timeout=60)
    sock = env["XDG_RUNTIME_DIR"] + "/agentvisor/exec.sock"
    deadline = time.monotonic() + 30
    while not os.path.exists(sock) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.exists(sock)
    return env


@requires_bwrap
@pytest.mark.parametrize("path", ["in-process", "exec helper"])
def test_the_terminal_comes_back_as_it_was(caller, path):
    env, ws = caller
    env = through(path, env, ws)
    output, echo, size = in_a_terminal([AGENTVISOR, "exec", "--", "sh", "-c", HOSTILE], env, ws)
    assert b"\x1b[31mred\x1b[0m" in output and b"stdout-is-a-terminal" in output
    assert [seq for seq in ACTING if seq in output] == []
    assert (echo, size) == (True, (24, 80))
    # --raw-output passes the sequences (the probe sees them); modes still come back.
    raw = [AGENTVISOR, "exec", "--raw-output", "--", "sh", "-c", HOSTILE]
    output, echo, size = in_a_terminal(raw, env, ws)
    assert [seq for seq in ACTING if seq in output] == list(ACTING)
    assert (echo, size) == (True, (24, 80))


@requires_bwrap
def test_control_the_command_does_change_a_terminal(tmp_path):
    """Without agentvisor, the same command leaves echo off and the size changed."""
    _, echo, size = in_a_terminal(["sh", "-c", HOSTILE], dict(os.environ), tmp_path)
    assert (echo, size) == (False, (5, 20))


@requires_bwrap
def test_ctrl_c_on_a_terminal_still_ends_the_run(caller):
    env, ws = caller
    env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    master, slave = os.openpty()
    marker = "agentvisor-tty-ctrlc-" + os.urandom(4).hex()
    try:
        proc = subprocess.Popen(
            [AGENTVISOR, "exec", "--", "sh", "-c", f"sleep 30; : {marker}"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=ws,
            start_new_session=True,
        )
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(15) != 0
    finally:
        os.close(master)
        os.close(slave)
    time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""


def filtered(data, split=False):
    f = OutputFilter()
    if split:  # a sequence may arrive cut anywhere
        return b"".join(f.feed(data[i : i + 1]) for i in range(len(data))) + f.end()
    return f.feed(data) + f.end()


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize(
    "data, kept",
    [
        (b"text\r\n\t\x08\x07", b"text\r\n\t\x08\x07"),
        ("héllo ✓ 😀".encode(), "héllo ✓ 😀".encode()),
        (
            b"\x1b[1;31mred\x1b[0m \x1b[38;5;200mx\x1b[m",
            b"\x1b[1;31mred\x1b[0m \x1b[38;5;200mx\x1b[m",
        ),
        (
            b"\x1b[H\x1b[2J\x1b[10;5H\x1b[K\x1b[3A\x1b[1;24r\x1b[r",
            b"\x1b[H\x1b[2J\x1b[10;5H\x1b[K\x1b[3A\x1b[1;24r\x1b[r",
        ),
        (b"\x1b[2 q\x1b7\x1b8\x1b(0q\x1b(B\x1b[0 q", b"\x1b[2 q\x1b7\x1b8\x1b(0q\x1b(B\x1b[0 q"),
        (b"\x1b]0;title\x07a", b"a"),  # window title
        (b"\x1b]2;title\x1b\\a", b"a"),
        (b"\x1b]52;c;cHduZWQ=\x07a", b"a"),  # clipboard
        (b"\x1b]1337;File=x\x07a", b"a"),
        (b"\x1bP$qm\x1b\\a", b"a"),  # DCS (DECRQSS asks for an answer)
        (b"\x1b_Gf=100;AAAA\x1b\\a", b"a"),  # APC (graphics)
        (b"\x1b^pm\x1b\\\x1bXsos\x1b\\a", b"a"),
        (b"\x1bktitle\x1b\\a", b"a"),  # screen's title
        (b"\x1b[5n\x1b[6n\x1b[?6n\x1b[c\x1b[>c\x1b[=c\x1b[?1$p\x1b[>q\x1b[?u\x1bZa", b"a"),
        (b"\x1b[8;5;20t\x1b[3;0;0t\x1b[21t\x1b[14ta", b"a"),  # window operations, reports
        (b"\x1b[?2l\x1b[?3h\x1b[2h\x05a", b"a"),  # VT52 mode, 132 columns, keyboard lock, ENQ
        (b"\xc2\x9d0;t\x07\x9b6na", b"a"),  # 8-bit C1 controls, as UTF-8 and raw
        # ... and as overlong UTF-8 (a lenient terminal decodes E0 82 9B as CSI)
        (b"\xe0\x82\x9b6na", b"a"),
        (b"\xf0\x80\x82\x9d0;t\x07a", b"a"),
        # modes that make the terminal type into the input: resize, colour scheme, win32 keys
        (b"\x1b[?2048h\x1b[?2031h\x1b[?9001h\x1b[?996h\x1b[?1004;2048ha", b"a"),
        (b"\x1b]0;unterminated\x1b[31mx", b"\x1b[31mx\x1b[m"),  # a new sequence ends the string
        (b"\x1b]0;t\x18a", b"a"),  # CAN cancels it
        # state the command put back itself: nothing more to send at the end
        (b"\x0eq\x0f\x1b=\x1b>\x1b[4;20h\x1b[4;20l", b"\x0eq\x0f\x1b=\x1b>\x1b[4;20h\x1b[4;20l"),
        (b"\x1b(0\x1b[4h\x1b[1 q\x1b#8", b"\x1b(0\x1b[4h\x1b[1 q\x1b#8\x1b(B\x0f\x1b[4l\x1b[0 q"),
        (b"\x1b[" + b"1;" * 200 + b"ma", b"a"),  # too long
    ],
)
def test_output_filter(data, kept, split):
    assert filtered(data, split) == kept


def test_output_filter_puts_modes_back():
    assert filtered(b"\x1b[?1049h\x1b[?25l\x1b[?1000;1006h\x1b[?2004h\x1b[?2004l") == (
        b"\x1b[?1049h\x1b[?25l\x1b[?1000;1006h\x1b[?2004h\x1b[?2004l"
        b"\x1b[?25h\x1b[?1000l\x1b[?1006l\x1b[?1049l"
    )
    assert filtered(b"\x1b[?1049h\x1b[?1049l") == b"\x1b[?1049h\x1b[?1049l"
    assert filtered(b"\x1b[?1h\x1b[?7l\x1b[?2026h") == (
        b"\x1b[?1h\x1b[?7l\x1b[?2026h\x1b[?1l\x1b[?7h\x1b[?2026l"
    )


@requires_bwrap
@pytest.mark.parametrize("path", ["in-process", "exec helper"])
def test_output_streams_and_a_resize_reaches_the_command(caller, path):
    """Output shows while the command runs (not all at its end), and the command sees the
    window's new size after a resize."""
    env, ws = caller
    env = through(path, env, ws)
    probe = (
        "import os, sys, time; print('ready', flush=True); sys.stdin.readline(); "
        "time.sleep(1); print('size', *os.get_terminal_size(1), flush=True)"
    )
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("4H", 24, 80, 0, 0))
    output = bytearray()

    def read_until(marker):
        deadline = time.monotonic() + 30
        while marker not in output and time.monotonic() < deadline:
            if select.select([master], [], [], 0.3)[0]:
                output.extend(os.read(master, 65536))
        return marker in output

    try:
        proc = subprocess.Popen(
            [AGENTVISOR, "exec", "--", "python3", "-c", probe],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=ws,
            start_new_session=True,
        )
        assert read_until(b"ready"), bytes(output)  # the command still waits for a line
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("4H", 30, 100, 0, 0))
        os.write(master, b"go\n")
        assert read_until(b"size 100 30"), bytes(output)
        assert proc.wait(30) == 0
    finally:
        os.close(master)
        os.close(slave)
