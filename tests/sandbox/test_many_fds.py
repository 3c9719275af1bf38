"""A busy gateway holds more than 1024 descriptors (200 sessions: sandboxes, sockets,
pipes); `select.select` refuses any above 1024, and a sandbox that could not be reaped
kept its cgroup slot until every slot was taken (issue 15, the 200-session run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentvisor.sandbox import Sandbox
from tests.conftest import requires_bwrap

pytestmark = requires_bwrap


@pytest.fixture
def low_fds_taken() -> Iterator[None]:
    """Every descriptor number up to 1100 taken: the next ones opened are above 1024."""
    held = []
    try:
        while (fd := os.open(os.devnull, os.O_RDONLY)) < 1100:
            held.append(fd)
        held.append(fd)
        yield
    finally:
        for fd in held:
            os.close(fd)


def test_sandboxes_start_and_end_with_descriptors_above_1024(
    workspace: Path, low_fds_taken: None
) -> None:
    probe = os.open(os.devnull, os.O_RDONLY)
    os.close(probe)
    assert probe > 1024, "control: new descriptors are numbered above select's limit"
    backend = Sandbox(workspace=workspace).backend
    for _ in range(3):
        box = backend.open_persistent()
        try:
            assert box.run(["echo", "hi"]).stdout.strip() == b"hi"
        finally:
            box.close()
