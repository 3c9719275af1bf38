"""Each protection of the docker backend, on real containers, with a control."""

from __future__ import annotations

import os
import socket
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentvisor.errors import ConfigError

from .conftest import WS_UID
from .helpers import managed, py, py_host, sandbox, sh, text

root_only = pytest.mark.skipif(os.getuid() != 0, reason="needs root to own test files")

STATUS = (
    "s = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines()"
    " if ':\\t' in l); print(s['CapEff'].strip(), s['NoNewPrivs'].strip(),"
    " s['Seccomp'].strip())"
)


@root_only
def test_runs_as_the_workspace_owner_not_root(ws: Path) -> None:
    result = sh(ws, "id -u; id -g; touch made-here")
    assert result.stdout.split() == [str(WS_UID).encode(), str(WS_UID).encode()], text(result)
    assert (ws / "made-here").stat().st_uid == WS_UID
    # Control: this test process itself is root.
    assert os.getuid() == 0


@root_only
def test_root_owned_workspace_never_runs_as_host_root(tmp_path: Path, image: str) -> None:
    ws = tmp_path / "rootws"
    ws.mkdir()
    (ws / "existing").write_text("old")
    box = sandbox(ws)
    result = box.run(
        ["sh", "-c", "id -u; echo new > made-here && echo old-too >> existing && echo wrote"]
    )
    uid = int(result.stdout.split()[0])
    assert uid != 0 and b"wrote" in result.stdout, text(result)
    # Written through an idmapped view: the files stay root's on the host.
    assert (ws / "made-here").stat().st_uid == 0
    assert (ws / "existing").read_text() == "oldold-too\n"
    # Control: this test process itself is root, and so is the workspace's owner.
    assert os.getuid() == 0 and ws.stat().st_uid == 0


def test_user_0_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sandbox.docker.user: '0:0' is root on the host"):
        sandbox(tmp_path, docker={"user": "0:0"})
    sandbox(tmp_path, docker={"user": "1000:1000"})  # control


def test_no_capabilities_no_new_privs_seccomp(ws: Path) -> None:
    result = py(ws, STATUS)
    assert result.stdout.split() == [b"0000000000000000", b"1", b"2"], text(result)
    if os.getuid() == 0:  # control: the probe sees capabilities where there are some
        assert py_host(STATUS).stdout.split()[0] != "0000000000000000"


def test_io_uring_and_ptrace_are_refused(ws: Path) -> None:
    code = textwrap.dedent("""
        import ctypes, errno, os
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(425, 4, ctypes.create_string_buffer(120))
        print("uring", fd >= 0, ctypes.get_errno())
        pid = os.fork()
        if pid == 0:
            import time; time.sleep(5); os._exit(0)
        r = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
        print("ptrace", r == 0, ctypes.get_errno())
        os.kill(pid, 9)
    """)
    result = py(ws, code)
    assert b"uring False 1" in result.stdout, text(result)
    assert b"ptrace False 1" in result.stdout, text(result)
    # Control: both work on the host (as root, or for our own child).
    host = py_host(code).stdout
    if "uring True" not in host:
        pytest.skip(f"io_uring is unavailable on this host too: {host}")
    assert "ptrace True" in host


def test_no_network_only_loopback(ws: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        code = textwrap.dedent(f"""
            import socket, os
            print(sorted(os.listdir("/sys/class/net")))
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2); print("reached")
            except OSError as e:
                print("blocked", e.errno)
        """)
        result = py(ws, code)
        assert b"['lo']" in result.stdout and b"blocked" in result.stdout, text(result)
        assert b"reached" in py_host(code).stdout.encode()  # control
    finally:
        listener.close()


def test_environment_is_the_allowlist_only(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTVISOR_TEST_API_KEY", "sk-test-secret")
    monkeypatch.setenv("PROJECT_NAME", "demo")
    code = (
        "import os, glob\nprint(sorted(os.environ))\n"
        "for p in glob.glob('/proc/[0-9]*/environ'):\n"
        "    try:\n"
        "        if b'sk-test-secret' in open(p, 'rb').read(): print('LEAK', p)\n"
        "    except OSError: pass\n"
    )
    result = py(ws, code, env_passthrough=["PROJECT_NAME", "AGENTVISOR_TEST_API_KEY"])
    out = text(result)
    assert "AGENTVISOR_TEST_API_KEY" not in out and "LEAK" not in out, out
    assert "PROJECT_NAME" in out  # control: a passed-through name does arrive
    assert "sk-test-secret" in py_host("import os; print(os.environ)").stdout


def test_host_processes_are_invisible(ws: Path) -> None:
    victim = subprocess.Popen(["sleep", "60"])
    try:
        result = py(
            ws,
            f"import os\ntry:\n    os.kill({victim.pid}, 9); print('sent')\n"
            "except OSError as e: print('blocked', e.errno)\n"
            "print(len([p for p in os.listdir('/proc') if p.isdigit()]))",
        )
        assert b"blocked" in result.stdout or victim.poll() is None, text(result)
        assert victim.poll() is None
        assert int(result.stdout.split()[-1]) < 10, text(result)  # only the container's own
    finally:
        victim.kill()


def test_read_only_image_filesystem(tmp_path: Path, image: str) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    # Commands never run as root, so the mount's own flags are the probe.
    probe = (
        "print([m.split()[3].split(',')[0] for m in open('/proc/self/mounts')"
        " if m.split()[1] == '/'][-1])"
    )
    ro = py(ws, probe)
    rw = py(ws, probe, docker={"read_only_root": False})
    assert ro.stdout.strip() == b"ro", text(ro)
    assert rw.stdout.strip() == b"rw", text(rw)  # control


def test_scratch_tmpfs_sizes_and_noexec(ws: Path) -> None:
    script = textwrap.dedent("""
        for d in /tmp /var/tmp /run "$HOME"; do
            printf '#!/bin/sh\\necho ran\\n' > "$d/x.sh" && chmod +x "$d/x.sh"
            printf '%s ' "$d"; "$d/x.sh" 2>/dev/null || echo noexec
        done
        head -c 12582912 /dev/zero > /tmp/big 2>/dev/null && echo big-ok || echo full
    """)
    result = sh(ws, script, tmp_size_mb=8)
    out = result.stdout.decode()
    assert "/tmp ran" in out and f"{Path.home()} ran" in out, out  # control: exec works there
    assert "/var/tmp noexec" in out and "/run noexec" in out, out
    assert "full" in out, out


def test_runs_code_later_paths_stay_read_only(ws: Path) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    script = textwrap.dedent("""
        for f in .git/hooks/pre-commit .git/config .envrc .vscode/tasks.json; do
            (echo x >> "$f") 2>/dev/null && echo "wrote $f" || echo "refused $f"
        done
        mv .git .git-moved 2>/dev/null && echo moved || echo "refused mv"
        echo ok > normal.txt && echo "wrote normal"
    """)
    out = sh(ws, script).stdout.decode()
    assert "wrote" not in out.replace("wrote normal", ""), out
    assert "refused mv" in out and "wrote normal" in out, out  # control: the rest is writable
    assert not (ws / ".envrc").exists() and not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / ".git" / "config").read_text() == "[core]\n"


def test_mounts_read_only_unless_rw(ws: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "f").write_text("x")
    os.chmod(data, 0o777)
    script = "cat /ro/f; touch /ro/new && echo ro-wrote; touch /rw/new && echo rw-wrote"
    out = text(sh(ws, script, mounts=[f"{data}:/ro", f"{data}:/rw:rw"]))
    assert "ro-wrote" not in out and "rw-wrote" in out, out
    assert (data / "new").exists()


def test_protected_path_inside_a_mount_is_masked(ws: Path, tmp_path: Path) -> None:
    data = tmp_path / "share"
    (data / "secret").mkdir(parents=True)
    (data / "secret" / "key").write_text("hidden")
    (data / "public").write_text("visible")
    out = text(
        sh(
            ws,
            "cat /share/public; cat /share/secret/key; ls /share/secret",
            mounts=[f"{data}:/share"],
            protected_paths=[str(data / "secret")],
        )
    )
    assert "visible" in out, out  # control: the rest of the mount is readable
    assert "hidden" not in out, out


def test_docker_socket_inside_a_mount_is_masked(ws: Path, engine: Any) -> None:
    code = textwrap.dedent("""
        import socket
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect("/hostrun/docker.sock"); print("CONNECTED")
        except OSError as e:
            print("blocked", e)
    """)
    out = text(py(ws, code, mounts=["/run:/hostrun"]))
    assert "CONNECTED" not in out and "blocked" in out, out
    s = socket.socket(socket.AF_UNIX)  # control: the socket is live on the host
    s.connect("/run/docker.sock")
    s.close()


def test_exit_codes_like_bwrap(ws: Path) -> None:
    box = sandbox(ws)
    assert box.run(["sh", "-c", "exit 3"]).exit_code == 3
    assert box.run(["sh", "-c", "kill -9 $$"]).exit_code == 137
    assert box.run(["sh", "-c", "kill -TERM $$"]).exit_code == 143
    assert box.run(["true"]).ok


def test_timeout_kills_everything_and_exits_124(ws: Path, engine: Any) -> None:
    before = managed(engine)
    result = sh(ws, "sleep 120 & sleep 120", timeout=2)
    assert result.exit_code == 124 and result.timed_out
    assert result.duration < 15
    assert managed(engine) == before  # the container and its processes are gone


def test_background_processes_end_with_a_fresh_run(ws: Path) -> None:
    marker = f"agentvisor-bg-{os.getpid()}"
    result = sh(
        ws, f"nohup sh -c 'sleep 300; : {marker}' >/dev/null 2>&1 & setsid sleep 301 & echo started"
    )
    assert b"started" in result.stdout
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left == "", left


def test_stdin_stream_and_output(ws: Path) -> None:
    box = sandbox(ws)
    result = box.run(["sh", "-c", "cat; echo err >&2"], stdin=b"hello\n")
    assert result.stdout == b"hello\n" and result.stderr == b"err\n"
    chunks = list(box.stream(["sh", "-c", "echo one; echo two >&2; exit 5"]))
    assert b"".join(c.data for c in chunks if c.stream == "stdout") == b"one\n"
    assert b"".join(c.data for c in chunks if c.stream == "stderr") == b"two\n"
    assert chunks[-1].result is not None and chunks[-1].result.exit_code == 5


def test_memory_limit_ends_the_command(ws: Path) -> None:
    hog = "b = []\nfor _ in range(1024): b.append(bytearray(1 << 20))\nprint('held')"
    small = py(ws, hog.replace("1024", "16"), memory_mb=128)
    assert b"held" in small.stdout, text(small)  # control: a small allocation works
    big = py(ws, hog, memory_mb=128)
    assert big.exit_code == 137 and b"held" not in big.stdout, text(big)
    assert big.limits_hit == ("memory",)


def test_pids_limit(ws: Path) -> None:
    code = textwrap.dedent("""
        import os, time
        n = 0
        try:
            for _ in range(200):
                if os.fork() == 0:
                    time.sleep(3); os._exit(0)
                n += 1
        except OSError as e:
            print("stopped", n, e.errno)
        print("forked", n)
    """)
    out = text(py(ws, code, pids=40))
    assert "stopped" in out and int(out.split("forked")[1].split()[0]) < 40, out
    assert "stopped" not in text(py(ws, code.replace("200", "10"), pids=40))  # control


def test_file_size_limit(ws: Path) -> None:
    script = "head -c 3145728 /dev/zero > big 2>/dev/null && echo wrote || echo limited"
    assert b"limited" in sh(ws, script, file_size_mb=1).stdout
    assert b"wrote" in sh(ws, script, file_size_mb=8).stdout  # control


def test_attached_to_a_callers_fds_and_cancelled(ws: Path, engine: Any) -> None:
    """The gateway's exec server hands over a client's stdio and a cancel fd."""
    box = sandbox(ws)
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    cancel_r, cancel_w = os.pipe()
    os.write(stdin_w, b"through the caller's stdin\n")
    os.close(stdin_w)
    result = box.run_attached(
        ["sh", "-c", "cat; echo e >&2"], stdio=(stdin_r, out_w, err_w), cancel_fd=cancel_r
    )
    assert result.exit_code == 0
    assert os.read(out_r, 1000) == b"through the caller's stdin\n"
    assert os.read(err_r, 1000) == b"e\n"
    before = managed(engine)
    os.write(cancel_w, b"K")  # the client asked to stop
    cancelled = box.run_attached(["sleep", "60"], stdio=(stdin_r, out_w, err_w), cancel_fd=cancel_r)
    assert cancelled.exit_code == 137 and cancelled.duration < 15
    assert managed(engine) == before
    for fd in (stdin_r, out_r, out_w, err_r, err_w, cancel_r, cancel_w):
        os.close(fd)


def test_a_caller_that_went_away_still_ends_the_container(ws: Path, engine: Any) -> None:
    in_r, in_w = os.pipe()
    os.close(in_w)
    out_r, out_w = os.pipe()
    os.close(out_r)  # nobody reads: every write fails with EPIPE
    before = managed(engine)
    result = sandbox(ws).run_attached(
        ["sh", "-c", "yes | head -c 1000000"], stdio=(in_r, out_w, out_w), cancel_fd=None
    )
    os.close(out_w)
    os.close(in_r)
    assert result.exit_code == 0
    assert managed(engine) == before
    assert not (ws / ".envrc").exists()  # the read-only stand-ins are gone too
