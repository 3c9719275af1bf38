"""Fixtures for the docker backend tests: a real engine, the local image, workspaces.

Every test here runs real containers. When no Docker engine can be reached the tests
are skipped, and the run ends with a loud banner saying the docker backend was not
tested (``make test`` installs and starts one: scripts/docker-start.sh).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentvisor.sandbox.docker.image import DEFAULT_TAG, ensure_image

# Non-root owner of test workspaces, so the default user (auto) is not root.
WS_UID = 12345
_skipped: list[str] = []


def _connect() -> tuple[Any, str | None]:
    try:
        from docker.utils import kwargs_from_env

        import docker

        api = docker.APIClient(timeout=60, **kwargs_from_env())
        api.ping()
        return api, None
    except Exception as exc:  # any failure means: no engine here
        return None, str(exc)


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    api, why = _connect()
    if api is None:
        _skipped.append(why or "unknown")
        pytest.skip(f"NO DOCKER ENGINE, the docker backend was NOT tested: {why}")
    yield api
    # Nothing a test started may outlive the session.
    for container in api.containers(all=True, filters={"label": "agentvisor.managed=1"}):
        api.remove_container(container["Id"], force=True)


@pytest.fixture(scope="session")
def image(engine: Any) -> str:
    """The default sandbox image, built from this machine's files when missing or stale."""
    ensure_image(engine, DEFAULT_TAG)
    return DEFAULT_TAG


@pytest.fixture
def ws(tmp_path: Path, image: str) -> Path:
    """A workspace owned by an unprivileged uid (when the tests run as root)."""
    path = tmp_path / "ws"
    path.mkdir()
    if os.getuid() == 0:
        os.chown(path, WS_UID, WS_UID)
    return path


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _skipped:
        terminalreporter.write_sep("!", "DOCKER BACKEND NOT TESTED", red=True, bold=True)
        terminalreporter.write_line(f"no Docker engine could be reached: {_skipped[0]}")
        terminalreporter.write_line("start one with scripts/docker-start.sh (make test does)")
