"""Installed Wasm tools and their lock file, in agentvisor's state directory.

Layout (``$XDG_STATE_HOME/agentvisor/wasm``, which no sandbox can see)::

    tools.lock              JSON: per tool, its version and the SHA-256 of its module
                            and manifest as the operator accepted them
    tools/NAME/tool.yaml    the accepted manifest, byte for byte
    tools/NAME/MODULE.wasm  the accepted module

A tool is installed only by `ToolStore.install`, which the ``agentvisor tool install``
command calls after the operator accepted the capabilities; nothing an agent can call
reaches it. `ToolStore.open` checks both files against the lock every time a tool is
loaded, so a module or manifest changed after it was accepted is refused until the
operator installs it again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from .. import paths
from ..records import Declared, asdict
from .errors import ManifestError, ToolChanged, ToolNotInstalled
from .manifest import MANIFEST_FILE, Manifest, parse_manifest

LOCK_FORMAT = 1
MAX_MANIFEST_BYTES = 256 * 1024
MAX_MODULE_BYTES = 64 * 1024 * 1024


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Package(Declared):
    """A tool read from its directory: what the operator is shown and may install."""

    manifest: Manifest
    manifest_bytes: bytes
    module_bytes: bytes
    source: Path

    @property
    def module_sha256(self) -> str:
        return sha256(self.module_bytes)


class LockEntry(Declared):
    name: str
    version: str
    module_sha256: str
    manifest_sha256: str
    installed_at: str
    source: str


class InstalledTool(Declared):
    """An installed tool whose files matched the lock when they were read."""

    entry: LockEntry
    manifest: Manifest
    module_bytes: bytes


def read_package(path: str | os.PathLike[str]) -> Package:
    """A tool directory (with ``tool.yaml``) or a manifest file, and the module it names."""
    given = Path(path)
    manifest_path = given / MANIFEST_FILE if given.is_dir() else given
    manifest_bytes = _read(manifest_path, MAX_MANIFEST_BYTES, "manifest")
    manifest = parse_manifest(manifest_bytes, str(manifest_path))
    module_path = manifest_path.parent / manifest.module
    # The module is named by the manifest: it must be the file in the tool's directory,
    # never a link to somewhere else.
    module_bytes = _read(module_path, MAX_MODULE_BYTES, "module", follow=False)
    if not module_bytes.startswith(b"\0asm"):
        raise ManifestError(
            f"{module_path}: not a WebAssembly module (build it first, e.g. "
            "`make wasm-examples` for the examples)"
        )
    return Package(manifest, manifest_bytes, module_bytes, manifest_path.parent.resolve())


def _read(path: Path, limit: int, what: str, *, follow: bool = True) -> bytes:
    """A regular file's bytes; ``follow=False`` refuses a symbolic link (O_NOFOLLOW: the
    kernel never follows it, so no check-then-open race)."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        hint = " (build it first, e.g. `make wasm-examples`)" if what == "module" else ""
        raise ManifestError(f"{path}: {what} not found{hint}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise ManifestError(
                f"{path}: the {what} is a symbolic link; it must be a regular file in the "
                "tool's directory (links are never followed)"
            ) from None
        raise ManifestError(f"{path}: cannot read the {what}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ManifestError(f"{path}: the {what} is not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ManifestError(f"{path}: the {what} is larger than {limit // 1024} KiB")
    return data


class ToolStore:
    """The installed tools under one directory (agentvisor's state directory by default)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else paths.state_dir() / "wasm"

    @property
    def lock_path(self) -> Path:
        return self.root / "tools.lock"

    def tool_dir(self, name: str) -> Path:
        return self.root / "tools" / name

    def entries(self) -> dict[str, LockEntry]:
        from ..config.yamlfile import load_yaml

        try:
            content = self.lock_path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ToolChanged(f"{self.lock_path}: unreadable lock file ({exc.strerror})") from None
        # JSON, read by the YAML reader every file goes through: a key written twice (a
        # second entry for a tool) is an error, not silently the last one.
        hint = "; reinstall the tools or restore the file"
        try:
            data = load_yaml(content, self.lock_path, ToolChanged).data
        except ToolChanged as exc:
            raise ToolChanged(f"{exc}{hint}") from None
        if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT:
            raise ToolChanged(f"{self.lock_path}: not a lock file of format {LOCK_FORMAT}")
        try:
            return {name: LockEntry(**entry) for name, entry in data["tools"].items()}
        except (KeyError, TypeError, AttributeError):
            raise ToolChanged(f"{self.lock_path}: malformed lock file") from None

    def install(self, package: Package) -> LockEntry:
        """Copy the accepted files in and record their hashes; replaces an older version."""
        name = package.manifest.name
        entry = LockEntry(
            name=name,
            version=package.manifest.version,
            module_sha256=package.module_sha256,
            manifest_sha256=sha256(package.manifest_bytes),
            installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            source=str(package.source),
        )
        (self.root / "tools").mkdir(parents=True, exist_ok=True, mode=0o700)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=self.root / "tools"))
        try:
            (staging / MANIFEST_FILE).write_bytes(package.manifest_bytes)
            (staging / package.manifest.module).write_bytes(package.module_bytes)
            with self._locked():
                entries = self.entries()
                target = self.tool_dir(name)
                old = None
                if target.exists():
                    old = target.with_name(f".{name}-old-{os.getpid()}")
                    target.rename(old)
                staging.rename(target)
                entries[name] = entry
                self._write(entries)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return entry

    def remove(self, name: str) -> LockEntry:
        with self._locked():
            entries = self.entries()
            if name not in entries:
                raise ToolNotInstalled(_not_installed(name, entries))
            entry = entries.pop(name)
            self._write(entries)
            shutil.rmtree(self.tool_dir(name), ignore_errors=True)
        return entry

    def open(self, name: str) -> InstalledTool:
        """Read an installed tool, refusing it if either file differs from the lock."""
        entries = self.entries()
        if name not in entries:
            raise ToolNotInstalled(_not_installed(name, entries))
        entry = entries[name]
        folder = self.tool_dir(name)
        manifest_bytes = self._verified(folder / MANIFEST_FILE, entry.manifest_sha256, entry)
        try:
            manifest = parse_manifest(manifest_bytes, str(folder / MANIFEST_FILE))
        except ManifestError as exc:
            raise ToolChanged(
                f"{name}: the installed manifest no longer validates ({exc}); reinstall the tool"
            ) from None
        module_bytes = self._verified(folder / manifest.module, entry.module_sha256, entry)
        return InstalledTool(entry, manifest, module_bytes)

    def _verified(self, path: Path, expected: str, entry: LockEntry) -> bytes:
        how = f"the operator can accept it again with: agentvisor tool install {entry.source}"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ToolChanged(
                f"{entry.name}: {path.name} of the installed tool cannot be "
                f"read ({exc.strerror}); {how}"
            ) from None
        if sha256(data) != expected:
            raise ToolChanged(
                f"{entry.name}: {path.name} changed since the operator accepted "
                f"it (SHA-256 {sha256(data)[:16]}..., locked "
                f"{expected[:16]}...), so it is refused; {how}"
            )
        return data

    def _write(self, entries: dict[str, LockEntry]) -> None:
        data = {
            "format": LOCK_FORMAT,
            "tools": {name: asdict(entries[name]) for name in sorted(entries)},
        }
        fd, tmp = tempfile.mkstemp(prefix=".tools.lock-", dir=self.root)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, self.lock_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One installer or remover at a time (the lock file is read, changed, rewritten)."""
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with (self.root / ".lock").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield


def _not_installed(name: str, entries: dict[str, LockEntry]) -> str:
    known = ", ".join(sorted(entries)) or "none"
    return f"no Wasm tool named {name!r} is installed (installed: {known})"
