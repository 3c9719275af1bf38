"""Turning a tool's accepted capabilities into what one call's WASI instance gets.

Files: each granted directory is opened below the workspace one component at a time
without following symbolic links (``O_NOFOLLOW``), and handed to wasmtime as that open
directory (``/proc/self/fd/N``), so a link swapped in between the check and the
preopen cannot redirect it. wasmtime (cap-std) then keeps every path the tool opens
beneath that directory: ``..`` past it and links that lead out are refused. A
granted directory that would expose a protected path, or (for write) a file that makes
the host run code later, is refused, since a preopen cannot mask part of a directory.

Environment: only the granted names, with the host's values, are visible; nothing else.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..errors import PolicyDenied
from ..records import Declared
from .errors import ToolFailed
from .manifest import FileGrant, runs_code_later

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Preopen(Declared):
    host: str  # what wasmtime opens: /proc/self/fd/N for a directory held open here
    real: Path  # the directory, for messages
    guest: str
    writable: bool


@contextlib.contextmanager
def preopens(
    grants: list[FileGrant],
    workspace: str | os.PathLike[str],
    *,
    protected: list[Path],
    readonly: tuple[str, ...] = (),
) -> Iterator[list[Preopen]]:
    """The directories to preopen, held open for as long as the block runs.

    A read grant whose directory does not exist is left out (there is nothing to read);
    a write grant's directory is created. ``protected`` are the paths no tool may see
    (resolved);
    ``readonly`` extends the built-in runs-code-later paths (``sandbox.readonly_paths``).
    """
    if not grants:  # no workspace needed at all
        yield []
        return
    fds: list[int] = []
    try:
        root_path = Path(os.path.realpath(workspace))
        try:
            root = os.open(root_path, _DIR_FLAGS)
        except OSError as exc:
            raise ToolFailed(
                f"the workspace {root_path} cannot be opened: {exc.strerror}"
            ) from None
        fds.append(root)
        result = []
        for grant in grants:
            fd = _open_below(root, root_path, grant)
            if fd is None:
                continue
            fds.append(fd)
            real = Path(os.readlink(f"/proc/self/fd/{fd}"))
            _refuse_protected(real, grant, protected)
            if grant.access == "write":
                _refuse_runs_code_later(fd, real, grant, readonly)
            result.append(
                Preopen(f"/proc/self/fd/{fd}", real, grant.guest_path, grant.access == "write")
            )
        yield result
    finally:
        for fd in fds:
            os.close(fd)


def _open_below(root: int, root_path: Path, grant: FileGrant) -> int | None:
    fd = os.dup(root)
    if grant.path == ".":
        return fd
    try:
        for part in grant.path.split("/"):
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if grant.access != "write":
                    os.close(fd)
                    return None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as exc:
        os.close(fd)
        why = (
            "it is (or passes through) a symbolic link"
            if exc.errno in (errno.ELOOP, errno.ENOTDIR)
            else exc.strerror
        )
        raise PolicyDenied(
            f"refused: the granted directory {root_path / grant.path} cannot be opened: {why}"
        ) from None
    return fd


def _refuse_protected(real: Path, grant: FileGrant, protected: list[Path]) -> None:
    for path in protected:
        if real == path or path in real.parents or real in path.parents:
            raise PolicyDenied(
                f"refused: the granted directory {real} ({grant.path}) would "
                f"show the tool the protected path {path}"
            )


def _refuse_runs_code_later(
    fd: int, real: Path, grant: FileGrant, readonly: tuple[str, ...]
) -> None:
    """A writable directory may not hold .git, .envrc, .vscode or a configured one."""
    for entry in os.listdir(fd):
        clash = runs_code_later(entry, readonly)
        if clash:
            raise PolicyDenied(
                f"refused: write access to {real} would include {entry} "
                f"({clash} makes the host run code later)"
            )


def env_pairs(names: list[str], environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The granted variables that are set on the host, and nothing else."""
    return [(name, environ[name]) for name in names if name in environ]
