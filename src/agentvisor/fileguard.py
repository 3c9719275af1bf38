"""Host-side file access for the file tools, as strong as the sandbox's mount table.

Every path is opened relative to a root directory (the workspace or a configured
read/write root) with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)``: the kernel
itself refuses ``..`` that climbs out, symbolic links (also ones the agent planted) that
lead out, and ``/proc/self/...`` magic links, atomically — no window between a check
and the use. Kernels without openat2 get a component-by-component ``O_NOFOLLOW`` walk,
which refuses every symbolic link. Python has no openat2 binding, hence the small
ctypes call below.

On top of that: protected paths and the "runs code later" files are refused, regular
files with more than one hard link are refused (the other name may be outside), writes
go to a temporary file that is renamed into place (never through an existing link),
and reads are size-capped with binary detection.

With a changeset (agentvisor.changes), the workspace root is not the directory itself but
the session's overlay view (``view``, a descriptor from the sandbox's mount step): reads
see the changeset over the workspace, and writes land in the changeset, exactly as the
sandboxed commands see them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from . import protected
from .errors import AgentvisorError
from .records import Declared

SYS_OPENAT2 = 437  # the same number on every architecture (new syscall table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08


class FileRefused(AgentvisorError):
    """A file operation failed or was refused; the message says what and why."""


class GuardRefused(FileRefused):
    """Refused by the file guard's rules, whatever the policy said: a path outside the
    roots or leading out of them, a protected file, a file that runs code later. The
    gateway reports it as a refusal (rule ``fileguard``), not as an error."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Root(Declared):
    path: Path
    writable: bool


class Located(Declared):
    root: Root
    relative: str  # below the root, "" for the root itself

    @property
    def shown(self) -> str:
        return str(self.root.path / self.relative) if self.relative else str(self.root.path)


class FileGuard:
    """Opens files only below the given roots, refusing protected and code-running paths."""

    def __init__(
        self,
        workspace: Path,
        *,
        write_roots: Sequence[str | os.PathLike[str]] = (),
        read_roots: Sequence[str | os.PathLike[str]] = (),
        protected_extra: tuple[str, ...] = (),
        readonly_extra: tuple[str, ...] = (),
        max_read_bytes: int = 1 << 20,
        max_write_bytes: int = 10 << 20,
        view: Callable[[], int] | None = None,
        view_writer: tuple[int, int] | None = None,
    ) -> None:
        """``view``: gives an ``O_PATH`` descriptor of the workspace as the session's
        sandbox sees it (its changeset overlay); the caller keeps it open.
        ``view_writer``: the (uid, gid) that writes through the view, when a root caller's
        sandbox runs as another user: its overlay maps that user only (sandbox/identity.py)."""
        self.workspace = Path(os.path.realpath(workspace))
        self.view = view
        self.view_writer = view_writer
        roots = [Root(self.workspace, True)]
        roots += [Root(Path(os.path.realpath(p)), True) for p in write_roots]
        roots += [Root(Path(os.path.realpath(p)), False) for p in read_roots]
        self.roots = roots
        self.protected = [
            Path(os.path.realpath(p)) for p in protected.protected_paths(list(protected_extra))
        ]
        self.readonly = [
            *protected.RUNS_CODE_LATER,
            *protected.installation_inside(str(self.workspace)),
            *readonly_extra,
        ]
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes

    # -- locating -----------------------------------------------------------------------

    def locate(self, path: str, *, write: bool) -> Located:
        """Which root holds ``path`` (relative paths are relative to the workspace)."""
        if not path or "\0" in path:
            raise FileRefused("an empty path or a path with a NUL byte is not a file name")
        expanded = str(Path.home()) + path[1:] if path == "~" or path.startswith("~/") else path
        parts = _components(os.path.join(self.workspace, expanded))
        # A trailing "/" (or "/.") names a directory for the kernel: `x/` is never the file x.
        directory = "/" if expanded.endswith(("/", "/.")) else ""
        # Longest root first, so a write root inside a read root wins.
        for root in sorted(self.roots, key=lambda r: len(str(r.path)), reverse=True):
            depth = len(root.path.parts) - 1  # without the leading "/"
            if parts[:depth] == list(root.path.parts[1:]):
                if write and not root.writable:
                    raise GuardRefused(
                        f"{path}: {root.path} is a read-only root "
                        "(files.read_roots); writes go to the workspace or "
                        "files.write_roots"
                    )
                relative = "/".join(parts[depth:])
                return Located(root, relative + directory if relative else "")
        raise GuardRefused(
            f"{path}: outside the workspace {self.workspace} and the configured "
            "roots (files.read_roots / files.write_roots in the config)"
        )

    # -- opening ------------------------------------------------------------------------

    def open(self, located: Located, flags: int, mode: int = 0o644) -> int:
        """Open below the root; the kernel refuses any way out of it."""
        root_fd = self._open_root(located.root)
        try:
            return _open_beneath(
                root_fd, located.relative or ".", flags | os.O_CLOEXEC, mode, located.shown
            )
        finally:
            os.close(root_fd)

    def real_path(self, fd: int) -> Path:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))

    def check_target(self, fd: int, shown: str, *, write: bool) -> os.stat_result:
        """Refuse protected files, code-running files (writes) and hard-linked files."""
        real = self.real_path(fd)
        for p in self.protected:
            if real == p or p in real.parents:
                raise GuardRefused(
                    f"{shown}: {p} is a protected path; agentvisor never lets "
                    "tools read or write it"
                )
        if write:
            self._refuse_runs_code_later(real, shown)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise GuardRefused(
                f"{shown}: the file has {st.st_nlink} hard links; another name "
                "for it may be outside the workspace, so it is refused"
            )
        return st

    def _refuse_runs_code_later(self, real: Path, shown: str) -> None:
        try:
            rel = real.relative_to(self.workspace).as_posix()
        except ValueError:
            return
        for entry in self.readonly:
            base = entry.rstrip("/")
            if rel == base or rel.startswith(base + "/"):
                raise GuardRefused(
                    f"{shown}: {entry} makes the host run code later (git hooks, "
                    "git config, direnv, editor tasks, agentvisor's own installation), so "
                    "it is read-only for "
                    "agents"
                )

    # -- operations ---------------------------------------------------------------------

    def read_bytes(self, path: str) -> tuple[bytes, Path]:
        located = self.locate(path, write=False)
        try:
            fd = self.open(located, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise FileRefused(f"{path}: no such file") from None
        except NotADirectoryError:
            raise FileRefused(f"{path}: not a directory") from None
        try:
            st = self.check_target(fd, path, write=False)
            if stat.S_ISDIR(st.st_mode):
                raise FileRefused(f"{path}: is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise FileRefused(
                    f"{path}: not a regular file (devices, pipes and sockets are refused)"
                )
            if st.st_size > self.max_read_bytes:
                raise FileRefused(
                    f"{path}: {st.st_size} bytes is larger than the read limit "
                    f"of {self.max_read_bytes} bytes (files.max_read_bytes)"
                )
            data = os.read(fd, self.max_read_bytes + 1)
            return data[: self.max_read_bytes], self.real_path(fd)
        finally:
            os.close(fd)

    def read_text(self, path: str) -> tuple[str, Path]:
        data, real = self.read_bytes(path)
        if b"\0" in data[:8192]:
            raise FileRefused(f"{path}: looks like a binary file; read_file returns text only")
        return data.decode("utf-8", errors="replace"), real

    def write_bytes(self, path: str, data: bytes, *, create_dirs: bool = True) -> Path:
        """Write atomically: a temporary file in the same directory, renamed into place."""
        if len(data) > self.max_write_bytes:
            raise FileRefused(
                f"{path}: {len(data)} bytes is larger than the write limit of "
                f"{self.max_write_bytes} bytes (files.max_write_bytes)"
            )
        located = self.locate(path, write=True)
        if not located.relative:
            raise FileRefused(f"{path}: is a directory")
        parent_rel, _, name = located.relative.rpartition("/")
        if not name:
            raise FileRefused(f"{path}: names a directory (a trailing '/'), not a file")
        if name in (".", ".."):
            raise FileRefused(f"{path}: not a file name")
        through_view = self.view is not None and located.root.path == self.workspace
        writer = None
        if self.view is not None and self.view_writer is not None and through_view:
            self.view()  # may start the session's sandbox: as this process, not the writer
            writer = self.view_writer
        with _filesystem_identity(writer):
            return self._write(located, parent_rel, name, data, path, create_dirs)

    def _write(
        self, located: Located, parent_rel: str, name: str, data: bytes, path: str, create: bool
    ) -> Path:
        parent_fd = self._open_dir(located.root, parent_rel, path, create=create)
        try:
            parent_real = self.real_path(parent_fd)
            self._refuse_runs_code_later(parent_real / name, path)
            for p in self.protected:
                if parent_real / name == p or p in (parent_real / name).parents:
                    raise GuardRefused(f"{path}: {p} is a protected path")
            mode = self._existing_mode(parent_fd, name, path)
            tmp = f".{name}.agentvisor-{os.urandom(4).hex()}"
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode,
                dir_fd=parent_fd,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                os.unlink(tmp, dir_fd=parent_fd)
                raise
            os.close(fd)
            os.rename(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            return parent_real / name
        finally:
            os.close(parent_fd)

    def _existing_mode(self, parent_fd: int, name: str, shown: str) -> int:
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return 0o644
        if stat.S_ISLNK(st.st_mode):
            raise GuardRefused(f"{shown}: is a symbolic link; write to the file it names instead")
        if stat.S_ISDIR(st.st_mode):
            raise FileRefused(f"{shown}: is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{shown}: not a regular file")
        if st.st_nlink > 1:
            raise GuardRefused(
                f"{shown}: the file has {st.st_nlink} hard links; another name "
                "for it may be outside the workspace, so it is refused"
            )
        return stat.S_IMODE(st.st_mode) & 0o777

    def _open_root(self, root: Root) -> int:
        if self.view is not None and root.path == self.workspace:
            return os.dup(self.view())
        return os.open(root.path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def _open_dir(self, root: Root, rel: str, shown: str, *, create: bool) -> int:
        root_fd = self._open_root(root)
        try:
            if not rel:
                return os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root_fd)
            try:
                return _open_beneath(
                    root_fd, rel, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0, shown
                )
            except FileNotFoundError:
                if not create:
                    raise FileRefused(f"{shown}: the directory {rel} does not exist") from None
            if ".." in rel.split("/"):
                raise FileRefused(f"{shown}: directories are not created through '..'")
            fd = os.dup(root_fd)
            for part in rel.split("/"):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    nxt = _open_beneath(
                        fd, part, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0, shown
                    )
                finally:
                    os.close(fd)
                fd = nxt
            return fd
        finally:
            os.close(root_fd)


@contextlib.contextmanager
def _filesystem_identity(writer: tuple[int, int] | None) -> Iterator[None]:
    """Create files as ``writer`` (fsuid/fsgid, this thread only: the raw system calls
    affect the calling thread, unlike setuid), then go back."""
    if writer is None:
        yield
        return
    uid, gid = writer
    old_gid = _libc.setfsgid(gid)
    old_uid = _libc.setfsuid(uid)
    try:
        yield
    finally:
        _libc.setfsuid(old_uid)
        _libc.setfsgid(old_gid)


def _components(path: str) -> list[str]:
    """The names in an absolute path as the kernel walks them: ``.`` and empty names
    dropped, ``..`` kept. A ``..`` is never folded into the name before it: after a
    symbolic link (``link_etc/../x``) it means the link target's parent, as in the
    sandbox's shell, so only the kernel (openat2 beneath the root) may resolve it."""
    return [part for part in path.split("/") if part not in ("", ".")]


def _open_beneath(dir_fd: int, rel: str, flags: int, mode: int, shown: str) -> int:
    how = _OpenHow(
        flags=flags,
        mode=mode if flags & os.O_CREAT else 0,
        resolve=RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    )
    fd = _libc.syscall(SYS_OPENAT2, dir_fd, rel.encode(), ctypes.byref(how), ctypes.sizeof(how))
    if fd >= 0:
        return fd
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return _walk_nofollow(dir_fd, rel, flags, mode, shown)
    if err == errno.EXDEV:
        raise GuardRefused(
            f"{shown}: leads out of {_describe_root(dir_fd)} (through '..', a "
            "symbolic link or a /proc link), which is refused"
        )
    if err == errno.ELOOP:
        raise GuardRefused(
            f"{shown}: goes through a /proc magic link or too many symbolic links, which is refused"
        )
    raise OSError(err, os.strerror(err), shown)


def _walk_nofollow(dir_fd: int, rel: str, flags: int, mode: int, shown: str) -> int:
    """openat2 stand-in for old kernels: every component opened with O_NOFOLLOW."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise GuardRefused(f"{shown}: '..' is refused on this kernel (no openat2)")
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            nxt = os.open(
                part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
            os.close(fd)
            fd = nxt
        last = parts[-1] if parts else "."
        try:
            return os.open(last, flags | os.O_NOFOLLOW, mode, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise GuardRefused(
                    f"{shown}: is a symbolic link, which this kernel cannot "
                    "follow safely (no openat2)"
                ) from None
            raise
    finally:
        os.close(fd)


def _describe_root(dir_fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return "the root"
