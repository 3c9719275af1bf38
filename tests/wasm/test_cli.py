"""`agentvisor tool`: the operator accepts capabilities before anything is installed."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time

import pytest

from tests.conftest import AGENTVISOR, requires_bwrap, run_cli

from .conftest import EXAMPLES


@pytest.fixture
def env(tmp_path):
    return dict(
        os.environ, XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "config")
    )


def lock_exists(tmp_path) -> bool:
    return (tmp_path / "state" / "agentvisor" / "wasm" / "tools.lock").exists()


def test_install_without_a_terminal_or_yes_installs_nothing(built, tmp_path, env):
    r = subprocess.run(
        [AGENTVISOR, "tool", "install", str(built / "wordcount")],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 125 and "no terminal to accept" in r.stderr
    assert "read the whole workspace" in r.stdout  # the capabilities were shown
    assert not lock_exists(tmp_path)
    r = run_cli("tool", "install", str(built / "wordcount"), "--yes", env=env)  # control
    assert r.returncode == 0 and lock_exists(tmp_path), r.stderr


def on_terminal(args: list[str], answer: bytes, env: dict[str, str]) -> tuple[int, str]:
    """Run agentvisor with a pseudo-terminal as stdin/stdout and answer its prompt."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([AGENTVISOR, *args], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 60
    answered = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            if not answered and b"[y/N]" in output:
                os.write(master, answer + b"\n")
                answered = True
            if proc.poll() is not None and not ready:
                break
        return proc.wait(10), output.decode(errors="replace")
    finally:
        os.close(master)


@pytest.mark.parametrize(("answer", "installed"), [(b"n", False), (b"", False), (b"y", True)])
def test_install_on_a_terminal_asks_the_operator(built, tmp_path, env, answer, installed):
    status, output = on_terminal(["tool", "install", str(built / "notes")], answer, env)
    assert "read and WRITE WORKSPACE/notes" in output
    assert "Install notes with these capabilities? [y/N]" in output
    assert (status == 0) == installed and lock_exists(tmp_path) == installed, output


def test_every_example_installs_and_lists(built, env):
    for name in EXAMPLES:
        r = run_cli("tool", "install", str(built / name), "--yes", env=env)
        assert r.returncode == 0, r.stderr
        assert f"installed {name} 0.1.0" in r.stdout
    r = run_cli("tool", "list", env=env)
    assert r.returncode == 0
    for name in EXAMPLES:
        assert f"{name} 0.1.0  functions:" in r.stdout
    assert "[net api.github.com, env API_BASE_URL, secret GITHUB_TOKEN]" in r.stdout


def test_a_changed_tool_is_listed_as_refused(built, tmp_path, env):
    run_cli("tool", "install", str(built / "jsonlint"), "--yes", env=env)
    module = tmp_path / "state" / "agentvisor" / "wasm" / "tools" / "jsonlint" / "tool.wasm"
    module.write_bytes(module.read_bytes() + b"\0")
    r = run_cli("tool", "list", env=env)
    assert "jsonlint 0.1.0  REFUSED: jsonlint: tool.wasm changed" in r.stdout
    r = run_cli("tool", "inspect", "jsonlint", env=env)
    assert r.returncode == 125 and "changed since the operator accepted it" in r.stderr
    r = run_cli("tool", "install", str(built / "jsonlint"), "--yes", env=env)
    assert r.returncode == 0 and "replaces: jsonlint 0.1.0" in r.stdout
    r = run_cli("tool", "inspect", "jsonlint", env=env)
    assert r.returncode == 0 and "wasm_jsonlint_validate:" in r.stdout


def test_inspect_and_remove(built, env):
    run_cli("tool", "install", str(built / "api-client"), "--yes", env=env)
    r = run_cli("tool", "inspect", "api-client", env=env)
    assert "capabilities granted:" in r.stdout and "module SHA-256:" in r.stdout
    r = run_cli("tool", "remove", "api-client", env=env)
    assert r.returncode == 0 and "removed api-client 0.1.0" in r.stdout
    r = run_cli("tool", "remove", "api-client", env=env)
    assert r.returncode == 125 and "no Wasm tool named 'api-client'" in r.stderr


def test_a_module_that_breaks_the_abi_is_not_installed(built, tmp_path, env):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "tool.yaml").write_text(
        (built / "jsonlint" / "tool.yaml").read_text().replace("name: validate", "name: missing")
    )
    (folder / "tool.wasm").write_bytes((built / "jsonlint" / "tool.wasm").read_bytes())
    r = run_cli("tool", "install", str(folder), "--yes", env=env)
    assert r.returncode == 125 and "must export missing" in r.stderr
    assert not lock_exists(tmp_path)


@requires_bwrap
def test_an_agent_in_the_sandbox_cannot_touch_the_installed_tools(built, tmp_path, env):
    """The sandbox never sees agentvisor's state directory, even when the workspace
    holds it: an agent's command cannot rewrite the lock or swap an installed module."""
    r = run_cli("tool", "install", str(built / "jsonlint"), "--yes", env=env)
    assert r.returncode == 0, r.stderr
    wasm = tmp_path / "state" / "agentvisor" / "wasm"
    lock = (wasm / "tools.lock").read_text()
    module = (wasm / "tools" / "jsonlint" / "tool.wasm").read_bytes()
    attack = (
        f"echo '{{}}' > {wasm}/tools.lock; cp /bin/true {wasm}/tools/jsonlint/tool.wasm;"
        f" ls {wasm} && echo REACHED"
    )
    inside = subprocess.run(
        [AGENTVISOR, "exec", "--", "sh", "-c", attack],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "REACHED" not in inside.stdout, inside.stdout + inside.stderr
    assert (wasm / "tools.lock").read_text() == lock
    assert (wasm / "tools" / "jsonlint" / "tool.wasm").read_bytes() == module
    # control: the same command on the host reaches the files
    outside = subprocess.run(
        ["sh", "-c", f"ls {wasm} && echo REACHED"], capture_output=True, text=True
    )
    assert "REACHED" in outside.stdout
