"""A backend that runs nothing: ``handler(argv)`` says what each command printed.

For tests of the layers above the sandbox (the gateway pipeline, shaping, audit) that need
a command's result, not an isolated process, as httpx's ``MockTransport`` serves tests of
its clients::

    def handler(argv: Sequence[str]) -> Result:
        return Result(exit_code=0, stdout=b"hi\\n", stderr=b"")

    sandbox = Sandbox(config, backend=FakeBackend(handler))

Tests of protections use a real backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..errors import SandboxUnavailable
from .base import Attachment, Chunk, Result

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .persistent import PersistentSandbox

Handler = Callable[[Sequence[str]], Result]


class FakeBackend:
    name = "fake"
    persistent_sessions = False

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.calls: list[list[str]] = []  # every argv run, in order

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
        self.calls.append(list(argv))
        result = self.handler(argv)
        if not capture:
            return self._write(result, (1, 2))
        return result

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
        return self._write(self.run(argv), (stdio[1], stdio[2]))

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Iterator[Chunk]:
        result = self.run(argv)
        yield Chunk("stdout", result.stdout)
        yield Chunk("stderr", result.stderr)
        yield Chunk("exit", result=result)

    def dry_run(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        return list(argv)

    def for_session(self, session: str) -> FakeBackend:
        return self

    def open_persistent(self, attachment: Attachment | None = None) -> PersistentSandbox:
        raise SandboxUnavailable("the fake backend has no persistent sandbox")

    def close(self) -> None:
        pass

    @staticmethod
    def _write(result: Result, fds: tuple[int, int]) -> Result:
        for fd, data in zip(fds, (result.stdout, result.stderr), strict=True):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        return result
