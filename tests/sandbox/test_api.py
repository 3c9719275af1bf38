"""The Python API: run, stream, stdin, and what the sandbox reports about itself."""

from __future__ import annotations

import pytest

from agentvisor.errors import ConfigError
from agentvisor.sandbox import Sandbox
from tests.conftest import requires_bwrap

pytestmark = requires_bwrap


def test_run_captures_output_and_status(workspace):
    result = Sandbox(workspace=workspace).run(
        ["sh", "-c", "cat; echo err >&2; exit 4"], stdin=b"in\n"
    )
    assert (result.exit_code, result.stdout, result.stderr) == (4, b"in\n", b"err\n")
    assert not result.ok and not result.timed_out and result.duration > 0


def test_stream_yields_chunks_then_the_result(workspace):
    chunks = list(
        Sandbox(workspace=workspace).stream(["sh", "-c", "echo one; echo two >&2; exit 5"])
    )
    assert chunks[-1].stream == "exit" and chunks[-1].result.exit_code == 5
    out = b"".join(c.data for c in chunks if c.stream == "stdout")
    err = b"".join(c.data for c in chunks if c.stream == "stderr")
    assert (out, err) == (b"one\n", b"two\n")


def test_stream_timeout_ends_the_sandbox(workspace):
    chunks = list(Sandbox(workspace=workspace).stream(["sleep", "30"], timeout=0.5))
    assert chunks[-1].result.timed_out and chunks[-1].result.exit_code == 124


def test_limit_mechanisms_say_how_each_limit_is_enforced(workspace):
    mechanisms = Sandbox(workspace=workspace).limit_mechanisms
    assert {"memory_mb", "file_size_mb", "timeout"} <= set(mechanisms)
    assert all(isinstance(how, str) and how for how in mechanisms.values())


@pytest.mark.parametrize("argv", ["ls -l", []])
def test_argv_must_be_a_list(workspace, argv):
    with pytest.raises(ConfigError):
        Sandbox(workspace=workspace).run(argv)
