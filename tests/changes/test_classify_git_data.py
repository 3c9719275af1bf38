"""What the classifier holds among git's own files, and what it leaves as data: the
host-run class must not swallow ordinary git work (a commit rewrites ``.git/logs/HEAD``,
a fetch ``refs/remotes/origin/HEAD``). Real files in a workspace and an upper layer; the
effect of each held path on the user's git is tested through `agentvisor exec` in
tests/core/test_exec_changeset.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentvisor.changes.classify import Classifier
from agentvisor.changes.scan import ADDED, MODIFIED, Change


@pytest.fixture
def layers(tmp_path: Path) -> tuple[Path, Path]:
    workspace, upper = tmp_path / "ws", tmp_path / "upper"
    for directory in (".git/objects", ".git/refs/heads", "mirror.git/objects", "mirror.git/refs"):
        (workspace / directory).mkdir(parents=True)
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "mirror.git" / "HEAD").write_text("ref: refs/heads/main\n")
    upper.mkdir()
    return workspace, upper


def reason(layers: tuple[Path, Path], path: str, content: str, kind: str = ADDED) -> str | None:
    workspace, upper = layers
    (upper / path).parent.mkdir(parents=True, exist_ok=True)
    (upper / path).write_text(content)
    change = Change(path=path, kind=kind, entry="file", signature="s")
    return Classifier(str(workspace)).reason(change, str(upper))


@pytest.mark.parametrize(
    "path, content",
    [
        (".git/logs/HEAD", "0000 1111 a <a@x> 0 +0000\tcommit: one\n"),
        (".git/refs/remotes/origin/HEAD", "ref: refs/remotes/origin/main\n"),
        ("mirror.git/refs/remotes/origin/HEAD", "ref: refs/remotes/origin/main\n"),
        ("mirror.git/objects/ab/cdef", "blob"),
        ("notes/HEADLINES.md", "news\n"),
    ],
)
def test_git_data_is_applied(layers, path, content):
    assert reason(layers, path, content) is None


@pytest.mark.parametrize(
    "path, content, kind, why",
    [
        (".git/objects/info/alternates", "/elsewhere/objects\n", ADDED, "alternates"),
        (".git/HEAD", "../../elsewhere\n", MODIFIED, "not a branch or a commit id"),
        ("mirror.git/config", "[core]\n", MODIFIED, "bare repository mirror.git"),
        ("mirror.git/HEAD", "garbage\n", MODIFIED, "not a branch or a commit id"),
        ("vendor/HEAD", "ref: refs/heads/main\n", ADDED, "new file named HEAD"),
    ],
)
def test_what_git_would_obey_is_held(layers, path, content, kind, why):
    found = reason(layers, path, content, kind)
    assert found is not None and why in found, found


def test_control_an_ordinary_head_change_is_applied(layers):
    assert reason(layers, ".git/HEAD", "ref: refs/heads/feature\n", MODIFIED) is None
    assert reason(layers, "mirror.git/HEAD", "0" * 40 + "\n", MODIFIED) is None
