"""``agentvisor exec --backend docker``: output, input, exit status, dry run."""

from __future__ import annotations

from pathlib import Path

from ..conftest import run_cli
from .helpers import CLI_ENV


def exec_docker(ws: Path, *argv: str, input: str | None = None, timeout: str = "60"):
    return run_cli(
        "exec",
        "--backend",
        "docker",
        "--workspace",
        str(ws),
        "--timeout",
        timeout,
        "--",
        *argv,
        cwd=ws,
        input=input,
        env=CLI_ENV,
    )


def test_output_input_and_exit_status_pass_through(ws: Path) -> None:
    result = exec_docker(ws, "sh", "-c", "cat; echo to-err >&2; exit 7", input="from stdin\n")
    assert result.returncode == 7, result.stderr
    assert result.stdout == "from stdin\n"
    assert "to-err" in result.stderr


def test_timeout_exits_124(ws: Path) -> None:
    result = exec_docker(ws, "sleep", "30", timeout="1")
    assert result.returncode == 124
    assert "timed out after 1 s" in result.stderr


def test_dry_run_prints_the_hardened_container(ws: Path) -> None:
    result = run_cli(
        "exec",
        "--backend",
        "docker",
        "--workspace",
        str(ws),
        "--dry-run",
        "--",
        "make",
        "test",
        env=CLI_ENV,
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout
    for part in (
        "docker run --rm --init --network none",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--pids-limit 256",
        "--read-only",
        f"type=bind,source={ws},target={ws}",
        "--tmpfs /var/tmp:rw,noexec",
        "agentvisor-sandbox:latest make test",
    ):
        assert part in line, (part, line)
    # The read-only paths are bound read-only even before they exist.
    assert f"target={ws}/.envrc,readonly" in line, line
    assert not (ws / ".envrc").exists()  # and the stand-in is gone again
