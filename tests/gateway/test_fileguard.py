"""The file guard: reads and writes stay beneath the roots, whatever the path or the links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentvisor.fileguard import FileGuard, FileRefused


@pytest.fixture
def setup(tmp_path, isolated_home):
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "notes.txt").write_text("line one\nline two\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE")
    (ws / "link_etc").symlink_to("/etc")
    (ws / "sub" / "link_up").symlink_to("../..")
    (ws / "inner_link").symlink_to("notes.txt")
    ssh = isolated_home / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("KEY")
    (ws / "link_key").symlink_to(ssh / "id_rsa")
    return FileGuard(ws), ws, outside


def test_reads_inside_work(setup):
    guard, ws, _ = setup
    assert guard.read_text("notes.txt")[0].startswith("line one")
    assert guard.read_text(str(ws / "notes.txt"))[0].startswith("line one")
    assert guard.read_text("inner_link")[0].startswith("line one")  # a link that stays inside


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "/etc/passwd",
        "link_etc/passwd",
        "link_key",
        "sub/link_up/outside.txt",
        "sub/../../outside.txt",
        "/proc/self/environ",
        "~/.ssh/id_rsa",
        "/proc/self/root/etc/passwd",
    ],
)
def test_reads_that_leave_are_refused(setup, path):
    guard, _, _ = setup
    with pytest.raises(FileRefused):
        guard.read_text(path)


def test_control_plain_open_follows_the_links(setup):
    _, ws, _ = setup
    assert (ws / "sub" / "link_up" / "outside.txt").read_text() == "OUTSIDE"
    assert (ws / "link_key").read_text() == "KEY"


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "/tmp/agentvisor-outside-write.txt",
        "link_etc/agentvisor-test",
        "sub/link_up/outside.txt",
        ".git/hooks/pre-commit",
        ".git/config",
        "~/.bashrc",
        ".envrc",
        "link_key",
    ],
)
def test_writes_that_leave_or_run_code_are_refused(setup, path):
    guard, ws, outside = setup
    with pytest.raises(FileRefused):
        guard.write_bytes(path, b"pwned")
    assert outside.read_text() == "OUTSIDE"
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert not Path("/tmp/agentvisor-outside-write.txt").exists()


def test_write_creates_dirs_and_replaces_atomically(setup):
    guard, ws, _ = setup
    guard.write_bytes("new/dir/file.txt", b"hello")
    assert (ws / "new" / "dir" / "file.txt").read_text() == "hello"
    os.chmod(ws / "notes.txt", 0o600)
    guard.write_bytes("notes.txt", b"changed")
    assert (ws / "notes.txt").read_text() == "changed"
    assert (ws / "notes.txt").stat().st_mode & 0o777 == 0o600
    assert not [p for p in os.listdir(ws) if ".agentvisor-" in p]


def test_hard_linked_file_is_refused(setup):
    guard, ws, outside = setup
    os.link(outside, ws / "hard")
    with pytest.raises(FileRefused, match="hard links"):
        guard.read_text("hard")
    with pytest.raises(FileRefused, match="hard links"):
        guard.write_bytes("hard", b"x")
    assert outside.read_text() == "OUTSIDE"


def test_write_through_planted_symlink_is_refused(setup):
    guard, ws, outside = setup
    (ws / "planted").symlink_to(outside)
    with pytest.raises(FileRefused):
        guard.write_bytes("planted", b"x")
    assert outside.read_text() == "OUTSIDE"


def test_binary_and_size_limits(setup):
    guard, ws, _ = setup
    (ws / "bin.dat").write_bytes(b"\x00\x01\x02")
    with pytest.raises(FileRefused, match="binary"):
        guard.read_text("bin.dat")
    small = FileGuard(ws, max_read_bytes=4, max_write_bytes=4)
    with pytest.raises(FileRefused, match="read limit"):
        small.read_text("notes.txt")
    with pytest.raises(FileRefused, match="write limit"):
        small.write_bytes("x.txt", b"12345")


def test_protected_path_inside_workspace(tmp_path, isolated_home):
    (isolated_home / ".ssh").mkdir()
    (isolated_home / ".ssh" / "id_rsa").write_text("KEY")
    guard = FileGuard(isolated_home)
    with pytest.raises(FileRefused, match="protected"):
        guard.read_text(".ssh/id_rsa")
    with pytest.raises(FileRefused, match="protected"):
        guard.write_bytes(".ssh/authorized_keys", b"ssh-ed25519 AAAA")
    assert not (isolated_home / ".ssh" / "authorized_keys").exists()


def test_read_and_write_roots(tmp_path):
    ws, ro, rw = tmp_path / "ws", tmp_path / "ro", tmp_path / "rw"
    for d in (ws, ro, rw):
        d.mkdir()
    (ro / "doc.txt").write_text("docs")
    guard = FileGuard(ws, read_roots=[ro], write_roots=[rw])
    assert guard.read_text(str(ro / "doc.txt"))[0] == "docs"
    with pytest.raises(FileRefused, match="read-only root"):
        guard.write_bytes(str(ro / "doc.txt"), b"x")
    guard.write_bytes(str(rw / "out.txt"), b"ok")
    assert (rw / "out.txt").read_text() == "ok"


def test_devices_and_fifos_refused(setup):
    guard, ws, _ = setup
    os.mkfifo(ws / "pipe")
    with pytest.raises(FileRefused, match="regular file"):
        guard.read_text("pipe")


@pytest.mark.parametrize("path", ["link_etc/../x", "link_etc/../notes.txt", "sub/link_up/../x"])
def test_dotdot_after_a_link_means_what_the_kernel_means(setup, path):
    guard, ws, _ = setup
    # Control: for the kernel (and the sandbox's shell) the '..' climbs from the link's
    # target, not from the link's own directory.
    assert not os.path.realpath(ws / path).startswith(str(ws) + "/")
    with pytest.raises(FileRefused, match="leads out of"):
        guard.write_bytes(path, b"planted")
    with pytest.raises(FileRefused, match="leads out of"):
        guard.read_text(path)
    assert not (ws / "x").exists() and (ws / "notes.txt").read_text().startswith("line one")


def test_dotdot_through_a_real_directory_stays_allowed(setup):
    guard, ws, _ = setup
    assert guard.read_text("sub/../notes.txt")[0].startswith("line one")
    guard.write_bytes("sub/../made.txt", b"ok")
    assert (ws / "made.txt").read_bytes() == b"ok"
    with pytest.raises(FileRefused, match=r"through '\.\.'"):
        guard.write_bytes("new/../x.txt", b"no")  # creating a/.. is no kernel walk either


@pytest.mark.parametrize("path", ["notes.txt/", "notes.txt/.", "sub/new.txt/"])
def test_a_trailing_slash_names_a_directory_as_for_the_kernel(setup, path):
    guard, ws, _ = setup
    before = sorted(p.name for p in ws.rglob("*"))
    # Control: the kernel refuses such a path as a file, for reading and for writing
    # (pathlib would drop the slash, so plain strings).
    for flags in (os.O_RDONLY, os.O_WRONLY | os.O_CREAT):
        with pytest.raises((NotADirectoryError, IsADirectoryError, FileNotFoundError)):
            os.close(os.open(f"{ws}/{path}", flags))
    with pytest.raises(FileRefused, match="names a directory"):
        guard.write_bytes(path, b"planted")
    if path.startswith("notes.txt"):
        with pytest.raises(FileRefused, match="not a directory"):
            guard.read_text(path)
    assert sorted(p.name for p in ws.rglob("*")) == before
    assert (ws / "notes.txt").read_text().startswith("line one")
    assert guard.read_text("sub/../notes.txt")[0].startswith("line one")
