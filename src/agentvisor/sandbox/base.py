"""The small interface every sandbox backend implements, and the values it returns.

A backend turns (argv, cwd, timeout) into a `Result`, inside whatever isolation it
provides. Backends live one per module (``bwrap.py``, ``local.py``); `Sandbox` in
``__init__.py`` picks one from the config.
"""

from __future__ import annotations

from ..records import Declared, Default

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from pathlib import Path
    from typing import Protocol

    from .persistent import PersistentSandbox
else:
    Protocol = object  # the protocol only matters to type checkers

# Exit status reported when the wall-clock timeout ended the command (as coreutils timeout).
EXIT_TIMEOUT = 124


class Result(Declared):
    """What a command run in a sandbox produced."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    duration: float = 0.0
    # Resource limits that ended the command, e.g. ("memory",), when the kernel told us.
    limits_hit: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Chunk(Declared):
    """A piece of output from a streaming run; the last one carries the `Result`."""

    stream: str  # "stdout" | "stderr" | "exit"
    data: bytes = b""
    result: Result | None = None


class Attachment(Declared):
    """Extra wiring another layer asks a sandbox for (e.g. the egress proxy).

    ``binds`` are host paths made visible read-write at the given inside paths (a Unix
    socket, for instance); ``ro_data`` are files whose content is placed read-only at
    the inside path; ``env`` is added to the sandbox environment; ``argv_prefix`` runs
    before the command (a relay that then executes the command).
    """

    binds: Mapping[str, str] = Default(factory=dict)
    ro_data: Mapping[str, bytes] = Default(factory=dict)
    ro_binds: Mapping[str, str] = Default(factory=dict)
    env: Mapping[str, str] = Default(factory=dict)
    argv_prefix: Sequence[str] = ()


class Backend(Protocol):
    """One isolation mechanism: what `Sandbox`, the gateway's sessions and the exec
    front end call. Implementations fail closed (an unenforceable setting raises).

    A backend that runs each command in a fresh sandbox and keeps no state per session
    returns itself from `for_session` and does nothing in `close`; one that cannot keep
    a spawner alive for a session says ``persistent_sessions = False`` and raises
    `SandboxUnavailable` from `open_persistent`. A test double, for instance::

        class Echo:
            name = "echo"
            persistent_sessions = False

            def run(self, argv, *, cwd=None, timeout=None, stdin=None,
                    attachment=None, capture=True):
                return Result(0, " ".join(argv).encode(), b"")
            ...

    (`agentvisor.sandbox.fake.FakeBackend` is a complete one.)
    """

    name: str
    # True when `open_persistent` keeps one sandbox alive for a session (bwrap).
    persistent_sessions: bool

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        attachment: Attachment | None = None,
        capture: bool = True,
    ) -> Result:
        """Run ``argv`` and wait; without ``capture`` it writes to this process's stdio."""
        ...

    def run_attached(
        self,
        argv: Sequence[str],
        *,
        stdio: Sequence[int],
        cancel_fd: int | None,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Result:
        """Run with the given stdin/stdout/stderr fds (another process's terminal); end
        early when ``cancel_fd`` becomes readable."""
        ...

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Iterator[Chunk]:
        """Run ``argv``, yielding output chunks; the last chunk carries the `Result`."""
        ...

    def dry_run(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        """The command line that would run ``argv``, for a person to read."""
        ...

    def for_session(self, session: str) -> Backend:
        """The backend one gateway session runs its commands with (a docker session keeps
        one container); stateless backends return themselves."""
        ...

    def open_persistent(self, attachment: Attachment | None = None) -> PersistentSandbox:
        """One long-lived sandbox for a session, with a spawner inside."""
        ...

    def close(self) -> None:
        """Release what `for_session` set up (a session's container)."""
        ...
