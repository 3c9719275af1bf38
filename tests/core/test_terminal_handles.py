"""Issue 13.6, the class: under `agentvisor exec` on a terminal, the command never holds a
descriptor of the caller's terminal, so it cannot write past the output filter (reopening
/proc/self/fd/0 or /dev/stdin for writing, as a caller of the same uid may), nor change the
terminal's modes or size while it runs. It gets a fresh pseudo-terminal; keys and output
are relayed. Checked in a real pseudo-terminal, as an unprivileged caller and as root."""

from __future__ import annotations

import fcntl
import os
import select
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import termios
import time
from pathlib import Path

import pytest

from tests.conftest import AGENTVISOR, REPO, requires_bwrap

UID = 54321  # an unprivileged caller (no account needed)
TTY_GROUP = 5  # group "tty", as a login's terminal has it

# Reaches the caller's terminal past the filter if it holds any descriptor of it: reopened
# for writing, its modes and size set through stdin. Prints the device of its fds 0-2, then
# waits for a line (meanwhile the test looks at the caller's terminal).
PROBE = (
    r"for fd in 0 1 2; do stat -L -c 'device %t:%T' /proc/self/fd/$fd; done; "
    r"{ printf '\033]2;reopened-stdin\007' > /proc/self/fd/0; } 2>/dev/null; "
    r"{ printf '\033]2;reopened-stdout\007' > /proc/self/fd/1; } 2>/dev/null; "
    r"{ printf '\033]2;via-dev-stdin\007' > /dev/stdin; } 2>/dev/null; "
    r"stty -isig rows 7 cols 33 < /proc/self/fd/0 2>/dev/null; "
    r"echo probe-waits; read line; echo got-$line"
)
PAST_THE_FILTER = (b"reopened-stdin", b"reopened-stdout", b"via-dev-stdin")


class Terminal:
    """A real pseudo-terminal (24x80, echo on) standing for the caller's, owned by
    ``owner`` as a login's is; a program runs with it as stdin, stdout and stderr."""

    def __init__(self, owner: int) -> None:
        self.master, self.slave = os.openpty()
        os.fchown(self.slave, owner, TTY_GROUP)
        os.fchmod(self.slave, 0o620)
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("4H", 24, 80, 0, 0))
        self.output = bytearray()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=self.slave,
            stdout=self.slave,
            stderr=self.slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )

    def read_until(self, marker: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while marker not in self.output and time.monotonic() < deadline:
            if select.select([self.master], [], [], 0.3)[0]:
                self.output += os.read(self.master, 65536)
        assert marker in self.output, bytes(self.output)
        return bytes(self.output)

    def finish(self) -> bytes:
        assert self.proc is not None
        status = self.proc.wait(60)
        while select.select([self.master], [], [], 0.3)[0]:
            try:
                self.output += os.read(self.master, 65536)
            except OSError:
                break
        assert status == 0, bytes(self.output)
        return bytes(self.output)

    def echo_and_size(self) -> tuple[bool, tuple[int, int]]:
        echo = bool(termios.tcgetattr(self.slave)[3] & termios.ECHO)
        rows, cols, _, _ = struct.unpack(
            "4H", fcntl.ioctl(self.slave, termios.TIOCGWINSZ, bytes(8))
        )
        return echo, (rows, cols)

    def signals_and_size(self) -> tuple[bool, tuple[int, int]]:
        """Whether Ctrl-C signals (ISIG: the run's raw-input mode keeps it), and the size."""
        isig = bool(termios.tcgetattr(self.slave)[3] & termios.ISIG)
        return isig, self.echo_and_size()[1]

    def device(self) -> bytes:
        rdev = os.fstat(self.slave).st_rdev
        return f"device {os.major(rdev):x}:{os.minor(rdev):x}".encode()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


def probe_on(
    terminal: Terminal, argv: list[str], env: dict[str, str], cwd: Path, served_by: int = 0
) -> tuple[bytes, tuple[bool, tuple[int, int]]]:
    """Run ``argv`` (which runs PROBE) on ``terminal``: its output, and the caller's
    terminal's ISIG flag and size while the probe waited. ``served_by``: the pid of the
    exec helper that must be running the sandbox meanwhile."""
    terminal.start(argv, env, cwd)
    terminal.read_until(b"probe-waits")
    if served_by:
        children = Path(f"/proc/{served_by}/task").glob("*/children")
        assert any(path.read_text().split() for path in children), "the helper runs nothing"
    during = terminal.signals_and_size()
    os.write(terminal.master, b"go\n")  # typed keys reach the command
    output = terminal.finish()
    assert b"got-go" in output
    return output, during


def unprivileged_python() -> list[str]:
    """This agentvisor under an interpreter an unprivileged user can run (the test's own
    may live in root's home), or skip."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = shutil.which(version, path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        pytest.skip(f"no {version} outside root's home for an unprivileged caller")
    return [python, "-P", "-m", "agentvisor"]


@pytest.fixture
def unprivileged():
    """A home and workspace owned by UID, outside root's private temporary directories, and
    the environment that runs this agentvisor as UID."""
    base = Path(tempfile.mkdtemp(prefix="agentvisor-tty-"))
    for name in ("home", "ws", "run"):
        (base / name).mkdir()
    for path in (base, *base.iterdir()):
        os.chown(path, UID, UID)
    site = sysconfig.get_paths()["purelib"]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(base / "home"),
        "XDG_RUNTIME_DIR": str(base / "run"),
        "AGENTVISOR_NO_GATEWAY": "1",
        "PYTHONPATH": f"{REPO / 'src'}:{site}",
    }
    as_uid = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--"]
    cli = [*as_uid, *unprivileged_python()]
    check = subprocess.run([*cli, "--version"], env=env, cwd=base, capture_output=True)
    if check.returncode != 0:
        pytest.skip(f"agentvisor does not start as uid {UID}: {check.stderr[-300:]!r}")
    yield as_uid, cli, env, base / "ws"
    shutil.rmtree(base, ignore_errors=True)


@requires_bwrap
@pytest.mark.skipif(os.getuid() != 0, reason="switches to another uid")
@pytest.mark.parametrize("path", ["in-process", "exec helper"])
def test_unprivileged_command_cannot_reach_the_callers_terminal(unprivileged, path):
    _, cli, env, ws = unprivileged
    terminal = Terminal(owner=UID)
    helper = None
    if path == "exec helper":  # started by hand: `exec` starts none with PYTHONPATH set
        env = {k: v for k, v in env.items() if k != "AGENTVISOR_NO_GATEWAY"}
        helper = subprocess.Popen([*cli, "exec-helper", "--idle", "60"], env=env, cwd="/")
        socket = Path(env["XDG_RUNTIME_DIR"]) / "agentvisor" / "exec.sock"
        deadline = time.monotonic() + 30
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert socket.exists()
    try:
        argv = [*cli, "exec", "--", "sh", "-c", PROBE]
        output, during = probe_on(terminal, argv, env, ws, helper.pid if helper else 0)
        assert terminal.device() not in output  # no fd of the caller's terminal inside
        assert output.count(b"device 88:") == 3  # a pseudo-terminal in its place
        assert [seq for seq in PAST_THE_FILTER if seq in output] == [], output
        assert during == (True, (24, 80))
        assert terminal.echo_and_size() == (True, (24, 80))
    finally:
        terminal.close()
        if helper is not None:
            helper.terminate()
            helper.wait(30)


@requires_bwrap
@pytest.mark.skipif(os.getuid() != 0, reason="switches to another uid")
def test_control_the_same_probe_without_agentvisor_reaches_the_terminal(unprivileged):
    as_uid, _, env, ws = unprivileged
    terminal = Terminal(owner=UID)
    try:
        output, during = probe_on(terminal, [*as_uid, "sh", "-c", PROBE], env, ws)
        assert output.count(terminal.device()) == 3
        assert [seq for seq in PAST_THE_FILTER if seq in output] == list(PAST_THE_FILTER)
        assert during == (False, (7, 33))
    finally:
        terminal.close()


@pytest.fixture
def root_caller(tmp_path, isolated_home):
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    ws = tmp_path / "ws"
    ws.mkdir()
    yield env, ws
    subprocess.run([AGENTVISOR, "exec-helper", "--stop"], env=env, capture_output=True, timeout=30)


@requires_bwrap
@pytest.mark.parametrize("path", ["in-process", "exec helper"])
def test_root_callers_command_gets_a_pseudo_terminal_too(root_caller, path):
    env, ws = root_caller
    if path == "in-process":
        env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    else:  # a first run leaves the helper behind; the probe goes through it
        subprocess.run([AGENTVISOR, "exec", "--", "true"], env=env, cwd=ws, check=True)
    terminal = Terminal(owner=os.getuid())
    try:
        argv = [AGENTVISOR, "exec", "--", "sh", "-c", PROBE]
        output, during = probe_on(terminal, argv, env, ws)
        assert terminal.device() not in output and output.count(b"device 88:") == 3
        assert [seq for seq in PAST_THE_FILTER if seq in output] == []
        assert during == (True, (24, 80))
    finally:
        terminal.close()


@requires_bwrap
def test_a_run_in_the_background_takes_no_keys(root_caller):
    """A job in the background reads /dev/null, not the keys meant for the shell, and
    leaves the terminal's modes alone (control: the foreground job's command reads a
    terminal)."""
    env, ws = root_caller
    env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    command = "[ -t 0 ] && echo stdin-is-a-terminal; cat; echo cat-ended"
    # A session leader with the terminal as its controlling one (as a shell is) runs
    # `agentvisor exec` in its own process group: in the background, or in the foreground.
    leader = (
        "import fcntl, os, subprocess, sys, termios; "
        "fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "background = sys.argv[1] == 'background'; "
        "proc = subprocess.Popen(sys.argv[2:], process_group=0); "
        "background or os.tcsetpgrp(0, proc.pid); "
        "sys.exit(proc.wait())"
    )
    for where, stdin_is_a_terminal in (("background", False), ("foreground", True)):
        terminal = Terminal(owner=os.getuid())
        try:
            argv = [sys.executable, "-c", leader, where, AGENTVISOR, "exec", "--"]
            terminal.start([*argv, "sh", "-c", command], env, ws)
            if stdin_is_a_terminal:
                terminal.read_until(b"stdin-is-a-terminal")
                os.write(terminal.master, b"\x04")  # Ctrl-D: the end of cat's input
            output = terminal.finish()
            assert (b"stdin-is-a-terminal" in output) == stdin_is_a_terminal, output
            assert b"cat-ended" in output
        finally:
            terminal.close()


@requires_bwrap
@pytest.mark.parametrize("path", ["in-process", "exec helper"])
def test_ctrl_c_typed_on_the_terminal_ends_the_run(root_caller, path):
    """The caller's terminal is in a raw-input mode during the run, but Ctrl-C still
    signals the caller's job, which ends the run."""
    env, ws = root_caller
    if path == "in-process":
        env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    else:
        subprocess.run([AGENTVISOR, "exec", "--", "true"], env=env, cwd=ws, check=True)
    leader = (
        "import fcntl, os, subprocess, sys, termios; "
        "fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
        "proc = subprocess.Popen(sys.argv[1:], process_group=0); "
        "os.tcsetpgrp(0, proc.pid); "
        "sys.exit(0 if proc.wait() != 0 else 1)"
    )
    terminal = Terminal(owner=os.getuid())
    try:
        argv = [sys.executable, "-c", leader, AGENTVISOR, "exec", "--"]
        terminal.start([*argv, "sh", "-c", "echo started; sleep 60"], env, ws)
        terminal.read_until(b"started")
        os.write(terminal.master, b"\x03")
        terminal.finish()
        assert terminal.echo_and_size() == (True, (24, 80))
    finally:
        terminal.close()


@requires_bwrap
@pytest.mark.parametrize("path", ["in-process", "exec helper"])
def test_a_resize_signals_the_command(root_caller, path):
    """The pseudo-terminal is not the command's controlling terminal (the sandbox's new
    session has none), so the kernel would not send SIGWINCH: the relay does."""
    env, ws = root_caller
    if path == "in-process":
        env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    else:
        subprocess.run([AGENTVISOR, "exec", "--", "true"], env=env, cwd=ws, check=True)
    waits_for_winch = (
        "import os, signal; signal.signal(signal.SIGWINCH, lambda *_: None); "
        "print('ready', flush=True); signal.pause(); "
        "print('winch', *os.get_terminal_size(1), flush=True)"
    )
    terminal = Terminal(owner=os.getuid())
    try:
        terminal.start([AGENTVISOR, "exec", "--", "python3", "-c", waits_for_winch], env, ws)
        terminal.read_until(b"ready")
        fcntl.ioctl(terminal.slave, termios.TIOCSWINSZ, struct.pack("4H", 30, 100, 0, 0))
        assert b"winch 100 30" in terminal.read_until(b"winch", timeout=30)
        terminal.finish()
    finally:
        terminal.close()


@requires_bwrap
def test_the_raw_input_mode_comes_back_after_the_shell_set_its_own(root_caller):
    """After Ctrl-Z and `fg` the shell has put its own modes on the terminal; while the run
    goes on, the relay puts its raw-input mode back (else every key would echo twice)."""
    env, ws = root_caller
    env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    terminal = Terminal(owner=os.getuid())
    try:
        terminal.start(
            [AGENTVISOR, "exec", "--", "sh", "-c", "echo ready; read x; echo got-$x"], env, ws
        )
        terminal.read_until(b"ready")
        assert terminal.echo_and_size()[0] is False  # the run's raw-input mode
        modes = termios.tcgetattr(terminal.slave)
        modes[3] |= termios.ECHO | termios.ICANON  # as a shell leaves it
        termios.tcsetattr(terminal.slave, termios.TCSANOW, modes)
        deadline = time.monotonic() + 10
        while terminal.echo_and_size()[0] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert terminal.echo_and_size()[0] is False
        os.write(terminal.master, b"ok\r")
        assert b"got-ok" in terminal.finish()
        assert terminal.echo_and_size() == (True, (24, 80))
    finally:
        terminal.close()


def test_keys_after_the_run_stay_the_shells_though_a_leftover_holds_the_terminal(root_caller):
    """The exec helper outlives the run; once the run is over its relay reads no key, even
    while a process left behind (the local backend has no pid namespace to end it) still
    holds the command's pseudo-terminal. (Two things stop it: the end of the run, and its
    client, gone, no longer being the foreground job.)"""
    env, ws = root_caller
    subprocess.run([AGENTVISOR, "exec", "--", "true"], env=env, cwd=ws, check=True)
    marker = "agentvisor-tty-leftover-" + os.urandom(4).hex()
    leftover = f"(exec -a {marker} sleep 30 &); echo started"
    terminal = Terminal(owner=os.getuid())
    try:
        argv = [AGENTVISOR, "exec", "--backend", "local", "--", "bash", "-c", leftover]
        terminal.start(argv, env, ws)
        terminal.finish()
        os.write(terminal.master, b"for-the-shell\n")
        time.sleep(1.5)
        os.set_blocking(terminal.slave, False)
        assert os.read(terminal.slave, 100) == b"for-the-shell\n"
    finally:
        terminal.close()
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        for pid in found.stdout.split():
            os.kill(int(pid), 9)


@requires_bwrap
def test_a_full_screen_program_gets_each_key_on_its_own_terminal(root_caller):
    """A program that puts its terminal in raw mode (an editor, a pager) gets each key as
    it is typed; the mode is its pseudo-terminal's, not the caller's terminal's."""
    env, ws = root_caller
    env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    editor = (
        "import sys, tty; tty.setraw(0); print('raw', flush=True); "
        "key = sys.stdin.read(1); tty.setcbreak(0); print('key', repr(key), flush=True)"
    )
    terminal = Terminal(owner=os.getuid())
    try:
        terminal.start([AGENTVISOR, "exec", "--", "python3", "-c", editor], env, ws)
        terminal.read_until(b"raw")
        assert terminal.signals_and_size()[0] is True  # the caller's Ctrl-C still signals
        os.write(terminal.master, b"q")  # no Return
        assert b"key 'q'" in terminal.read_until(b"key")
        terminal.finish()
        assert terminal.echo_and_size() == (True, (24, 80))
    finally:
        terminal.close()


@requires_bwrap
def test_a_harness_under_run_gets_its_own_terminal_and_every_key(root_caller):
    """`agentvisor run` on a terminal: the harness (a TUI, output unfiltered) gets a
    pseudo-terminal too, never the caller's, and the keys typed reach it (a relay reading
    the caller's terminal beside a harness holding it would split the keys between them)."""
    env, ws = root_caller
    env = dict(env, AGENTVISOR_NO_GATEWAY="1")
    terminal = Terminal(owner=os.getuid())
    try:
        argv = [AGENTVISOR, "run", "--profile", "generic", "--", "sh", "-c", PROBE]
        output, during = probe_on(terminal, argv, env, ws)
        assert terminal.device() not in output and output.count(b"device 88:") == 3
        assert during[1] == (24, 80)
    finally:
        terminal.close()
