"""The host-run class: changed paths that the user's own tools would execute or obey later.

These are held for a person in every mode that applies changes by itself: git
configuration, hooks, ``commondir``, ``info/attributes``, ``modules/*`` and
``worktrees/*`` of every repository at any depth; new ``.git`` directories or files
(a nested repository brings its own config) and new gitlinks in an index; anything under
a ``core.hooksPath`` that a repository's (or the user's) git config sets, or in a file such
a config includes (``include``/``includeIf``), and those included files themselves; hook
managers' configs (``.pre-commit-config.yaml``, ``lefthook.yml``, ``.husky/``); ``.envrc``,
editor task and settings files and ``agentvisor.yaml`` at any depth; and the operator's
``workspace.hold`` globs. Each reason says what would run.

Git config files are read here as text (never by running git: a planted ``core.fsmonitor``
would run the moment git looks at the repository).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..policy.globs import PathSet
from ..protected import installation_inside
from .scan import DELETED, Change

# Below a .git directory: what git reads as configuration or runs as code.
GIT_CONTROL = ("config", "config.worktree", "commondir", "hooks", "modules", "worktrees")
# Deeper ones: attributes pick the filters and diff drivers git runs; alternates add
# object stores (anywhere on the host) that git reads as its own.
GIT_CONTROL_PATHS = (
    ("info", "attributes"),
    ("objects", "info", "alternates"),
    ("objects", "info", "http-alternates"),
)
# What a .git/HEAD holds in ordinary use: a branch, or a commit's object id (SHA-1 or
# SHA-256). Anything else may make git pass over the repository and look for another.
ORDINARY_HEAD = re.compile(rb"(ref: refs/[^\s]+|[0-9a-f]{40}|[0-9a-f]{64})\n?")
HEAD_READ_LIMIT = 4096
# Editor files that run commands or change which programs run (at any depth).
EDITOR_FILES = (
    (".vscode", "settings.json"),
    (".vscode", "tasks.json"),
    (".vscode", "launch.json"),
    (".zed", "settings.json"),
    (".zed", "tasks.json"),
)
EDITOR_DIRS = (".idea", ".devcontainer", ".helix")
EDITOR_NAMES = (".nvim.lua", ".nvimrc", ".exrc")
CONFIG_NAMES = ("agentvisor.yaml", "agentvisor.yml")
# What the git hooks of hook managers run (pre-commit, lefthook; husky's hooks in .husky/,
# which its core.hooksPath .husky/_ only points at).
HOOK_MANAGER_FILES = (
    ".pre-commit-config.yaml",
    "lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.yml",
    ".lefthook-local.yml",
)
HOOK_MANAGER_DIRS = (".husky", ".githooks")
GITLINK_MODE = 0o160000
MAX_INCLUDES = 64  # git itself stops at a depth of 10; a loop of includes ends here


class Classifier:
    """Why a change must wait for a person, or None when it may be applied by itself."""

    def __init__(self, workspace: str, hold: list[str] | tuple[str, ...] = ()) -> None:
        self.workspace = workspace
        self._hold = PathSet(list(hold), str(Path.home()), base=workspace) if hold else None
        self._hooks_paths: dict[str, list[str]] = {}
        self._includes: dict[str, list[str]] = {}
        self._bare_dirs: dict[tuple[str, str], bool] = {}  # (upper, directory) -> bare
        self._installation = [entry.rstrip("/") for entry in installation_inside(workspace)]

    def forget(self) -> None:
        """Read the git configs again at the next check (they may have changed)."""
        self._hooks_paths.clear()
        self._includes.clear()
        self._bare_dirs.clear()

    def reason(self, change: Change, upper: str) -> str | None:
        parts = change.path.split("/")
        for check in (self._installation_file, self._named, self._editor, self._git):
            found = check(parts, change, upper)
            if found:
                return found
        found = (
            self._under_hooks_path(change.path)
            or self._included(change.path)
            or self._hook_manager(change.path)
        )
        if found:
            return found
        if self._hold is not None and self._hold.match(os.path.join(self.workspace, change.path)):
            return "matches workspace.hold"
        return None

    # -- the checks ----------------------------------------------------------------------

    def _installation_file(self, parts: list[str], change: Change, upper: str) -> str | None:
        for directory in self._installation:
            if change.path == directory or change.path.startswith(directory + "/"):
                return f"host-run: agentvisor's own installation is loaded from {directory}"
        return None

    def _named(self, parts: list[str], change: Change, upper: str) -> str | None:
        if parts[-1] == ".envrc":
            return "host-run: direnv runs .envrc when a shell enters the directory"
        if parts[-1] in CONFIG_NAMES:
            return f"host-run: {parts[-1]} is agentvisor configuration"
        return None

    def _hook_manager(self, path: str) -> str | None:
        parts = path.split("/")
        if parts[-1] in HOOK_MANAGER_FILES:
            return f"host-run: git hooks run what {parts[-1]} says"
        if any(part in HOOK_MANAGER_DIRS for part in parts):
            return "host-run: git hooks of a hook manager (husky) are run from there"
        return None

    def _editor(self, parts: list[str], change: Change, upper: str) -> str | None:
        for directory, name in EDITOR_FILES:
            if len(parts) >= 2 and (parts[-2], parts[-1]) == (directory, name):
                return f"host-run: the editor runs what {directory}/{name} says"
        if any(part in EDITOR_DIRS for part in parts[:-1]) or parts[-1] in EDITOR_DIRS:
            return "host-run: editor project settings can run commands"
        if parts[-1] in EDITOR_NAMES or parts[-1].endswith(".code-workspace"):
            return f"host-run: the editor runs {parts[-1]}"
        return None

    def _git(self, parts: list[str], change: Change, upper: str) -> str | None:
        for index, part in enumerate(parts):
            if part != ".git":
                continue
            repo = "/".join(parts[:index]) or "."
            git_path = os.path.join(self.workspace, *parts[: index + 1])
            if not os.path.lexists(git_path):
                return f"host-run: a new git repository in {repo} (its config and hooks would run)"
            below = parts[index + 1 :]
            if not below:
                return f"host-run: the .git of {repo} (where git finds its config and hooks)"
            if not os.path.isdir(git_path) or os.path.islink(git_path):
                return f"host-run: the .git of {repo} is not a plain directory"
            if _git_control(below):
                return f"host-run: git {'/'.join(below)} of {repo} (git reads or runs it)"
            if below == ["HEAD"]:
                return _odd_head(repo, change, upper)
            if below == ["index"] and change.entry == "file":
                return self._new_gitlinks(repo, change, upper)
        if ".git" in parts[:-1]:
            return None  # the rest of a .git directory is data (objects, refs, logs)
        return self._bare(parts, change, upper)

    def _bare(self, parts: list[str], change: Change, upper: str) -> str | None:
        """Bare repositories, in the workspace or written by the agent: a directory with
        HEAD, objects/ and refs/ is one for git run in it, which obeys its config."""
        top = self._bare_top(parts, upper)
        if top is not None:
            repo, below = "/".join(parts[:top]), parts[top:]
            if _git_control(below):
                return f"host-run: git {'/'.join(below)} of the bare repository {repo}"
            if below != ["HEAD"]:
                return None  # objects, refs (refs/remotes/origin/HEAD too), logs: data
        if parts[-1] != "HEAD" or change.kind == DELETED:
            return None
        if top is not None and os.path.lexists(os.path.join(self.workspace, change.path)):
            return _odd_head("/".join(parts[:-1]), change, upper)  # the repository's own
        # A new HEAD can make a repository of its directory, also of a config applied there
        # earlier, once objects/ and refs/ follow: it waits for a person.
        return "host-run: a new file named HEAD can make its directory a git repository"

    def _bare_top(self, parts: list[str], upper: str) -> int | None:
        """How many leading ``parts`` name the nearest bare repository above the path."""
        for top in range(len(parts) - 1, 0, -1):
            if self._is_bare("/".join(parts[:top]), upper):
                return top
        return None

    def _is_bare(self, directory: str, upper: str) -> bool:
        key = (upper, directory)
        known = self._bare_dirs.get(key)
        if known is None:
            known = self._bare_dirs[key] = all(
                os.path.lexists(os.path.join(self.workspace, directory, name))
                or os.path.lexists(os.path.join(upper, directory, name))
                for name in ("HEAD", "objects", "refs")
            )
        return known

    def _new_gitlinks(self, repo: str, change: Change, upper: str) -> str | None:
        rel = os.path.join(change.path)
        new = _gitlinks(os.path.join(upper, rel))
        if new is None:
            return f"host-run: the git index of {repo} could not be read, so it is held"
        old = _gitlinks(os.path.join(self.workspace, rel)) or set()
        added = sorted(new - old)
        if added:
            return f"host-run: new gitlink {', '.join(added)} in the index of {repo}"
        return None

    def _under_hooks_path(self, path: str) -> str | None:
        parts = path.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            repo = "/".join(parts[:depth])
            for hooks in self._hooks_for(repo):
                if path == hooks or path.startswith(hooks + "/"):
                    where = repo or "the workspace"
                    return f"host-run: under core.hooksPath {hooks} of {where}"
        return None

    def _included(self, path: str) -> str | None:
        """Whether ``path`` is a file that a repository's git config includes (``include``
        or ``includeIf``): git reads it as its own config (fsmonitor, hooksPath, ...)."""
        parts = path.split("/")
        for depth in range(len(parts) - 1, -1, -1):
            repo = "/".join(parts[:depth])
            if path in self._includes_for(repo):
                return f"host-run: the git config of {repo or 'the workspace'} includes {path}"
        return None

    def _includes_for(self, repo: str) -> list[str]:
        """Files inside the workspace that the config of the repository at ``repo`` (and
        the user's global config, for the top) includes, workspace-relative."""
        cached = self._includes.get(repo)
        if cached is None:
            inside = (self._relative(p) for p in self._configs(repo)[1])
            cached = self._includes[repo] = [rel for rel in inside if rel is not None]
        return cached

    def _configs(self, repo: str) -> tuple[list[str], list[str]]:
        """The git config files of the repository at ``repo`` (with the user's global ones
        for the top), and every file they include, as git reads them."""
        top = os.path.join(self.workspace, repo)
        roots = (
            [os.path.join(top, ".git", "config")]
            if os.path.isdir(os.path.join(top, ".git"))
            else []
        )
        if not repo:
            roots += _global_git_configs()
        included: list[str] = []
        pending = list(roots)
        while pending and len(included) < MAX_INCLUDES:
            for path in _include_paths(pending.pop()):
                if path not in roots and path not in included:
                    included.append(path)
                    pending.append(path)
        return roots, included

    def _relative(self, path: str) -> str | None:
        rel = os.path.relpath(os.path.normpath(path), self.workspace)
        return None if rel == ".." or rel.startswith("../") else rel

    def _hooks_for(self, repo: str) -> list[str]:
        """core.hooksPath values of the repository at ``repo`` (and the user's global
        config, and the files they include), as workspace-relative paths; only those
        inside the workspace matter."""
        cached = self._hooks_paths.get(repo)
        if cached is not None:
            return cached
        top = os.path.join(self.workspace, repo)
        found: list[str] = []
        roots, included = self._configs(repo)
        for config in [*roots, *included]:
            value = _hooks_path(config)
            if value is None:
                continue
            absolute = os.path.normpath(os.path.join(top, os.path.expanduser(value)))
            rel = os.path.relpath(absolute, self.workspace)
            if rel != ".." and not rel.startswith("../"):
                found.append("" if rel == "." else rel)
        self._hooks_paths[repo] = found
        return found


def _git_control(below: list[str]) -> bool:
    """Whether the path ``below`` a git directory is one git reads as config or runs."""
    return below[0] in GIT_CONTROL or any(
        tuple(below[: len(control)]) == control for control in GIT_CONTROL_PATHS
    )


def _odd_head(repo: str, change: Change, upper: str) -> str | None:
    """Why a changed ``.git/HEAD`` is held: anything but a branch or a commit id."""
    if change.kind == DELETED or change.entry != "file":
        return f"host-run: the HEAD of {repo} is {change.kind} (git looks for another repository)"
    try:
        with open(os.path.join(upper, change.path), "rb") as f:
            content = f.read(HEAD_READ_LIMIT)
    except OSError:
        return f"host-run: the HEAD of {repo} could not be read, so it is held"
    if ORDINARY_HEAD.fullmatch(content):
        return None
    return f"host-run: the HEAD of {repo} is not a branch or a commit id"


def _global_git_configs() -> list[str]:
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return [os.path.expanduser("~/.gitconfig"), os.path.join(xdg, "git", "config")]


def _hooks_path(config: str) -> str | None:
    """``core.hooksPath`` from a git config file (the common forms; the last one wins)."""
    values = [
        value for section, key, value in _entries(config) if (section, key) == ("core", "hookspath")
    ]
    return values[-1] if values else None


def _include_paths(config: str) -> list[str]:
    """The files a git config file includes (``[include]`` and every ``[includeIf ...]``,
    whatever its condition: it may hold later), as absolute paths: relative ones are
    relative to the including file's directory, as git reads them."""
    found = []
    for section, key, value in _entries(config):
        if key == "path" and (section == "include" or section.startswith("includeif")):
            path = os.path.expanduser(value)
            found.append(os.path.normpath(os.path.join(os.path.dirname(config), path)))
    return found


def _entries(config: str) -> list[tuple[str, str, str]]:
    """(section with its subsection, lower-case key, value) of a git config file, in the
    common forms; nothing when it cannot be read."""
    try:
        with open(config, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    section = ""
    entries = []
    for raw in lines:
        line = raw.strip()
        if line.startswith("["):
            section = line[1:].split("]", 1)[0].strip().lower()
            line = line.split("]", 1)[1].strip() if "]" in line else ""
        if "=" not in line or line.startswith(("#", ";")):
            continue
        key, _, rest = line.partition("=")
        entries.append((section, key.strip().lower(), rest.strip().strip('"')))
    return entries


def _gitlinks(index: str) -> set[str] | None:
    """Paths recorded as gitlinks (submodules) in a git index, None when it is unreadable.

    Parsed here (versions 2 to 4) rather than by running git on a repository the agent
    wrote, and without a new dependency for one read.
    """
    try:
        with open(index, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version = int.from_bytes(data[4:8], "big")
    count = int.from_bytes(data[8:12], "big")
    if version not in (2, 3, 4):
        return None
    links: set[str] = set()
    offset, previous = 12, b""
    try:
        for _ in range(count):
            start = offset
            mode = int.from_bytes(data[offset + 24 : offset + 28], "big")
            flags = int.from_bytes(data[offset + 60 : offset + 62], "big")
            offset += 62
            if version >= 3 and flags & 0x4000:
                offset += 2
            if version == 4:
                strip, offset = _varint(data, offset)
                end = data.index(b"\0", offset)
                name = previous[: len(previous) - strip] + data[offset:end]
                offset = end + 1
            else:
                end = data.index(b"\0", offset)
                name = data[offset:end]
                offset = start + ((end - start + 8) // 8) * 8
            previous = name
            if mode & 0o170000 == GITLINK_MODE:
                links.add(name.decode(errors="replace"))
    except (ValueError, IndexError):
        return None
    return links


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """git's offset varint (index version 4 path prefix lengths)."""
    byte = data[offset]
    value = byte & 0x7F
    offset += 1
    while byte & 0x80:
        byte = data[offset]
        value = ((value + 1) << 7) | (byte & 0x7F)
        offset += 1
    return value, offset
