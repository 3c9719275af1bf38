"""Fixtures for the Wasm tool tests: the probe and the examples built from source into a
temporary directory (with examples/wasm/build.py, as `make wasm-examples` does), a
temporary tool store, a workspace."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentvisor.wasm import ToolStore

from .helpers import Server

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "examples" / "wasm" / "build.py"
EXAMPLES = ("wordcount", "jsonlint", "api-client", "notes")


def _build(source: Path, into: Path) -> Path:
    shutil.copytree(source, into, ignore=shutil.ignore_patterns("*.wasm"))
    subprocess.run([sys.executable, str(BUILD), str(into)], check=True, capture_output=True)
    return into


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/wasm/probe and every example, each built into its own directory."""
    root = tmp_path_factory.mktemp("wasm-built")
    _build(Path(__file__).parent / "probe", root / "probe")
    for name in EXAMPLES:
        _build(REPO / "examples" / "wasm" / name, root / name)
    return root


@pytest.fixture(scope="session")
def probe(built: Path) -> Path:
    return built / "probe" / "tool.wasm"


@pytest.fixture
def store(tmp_path: Path) -> ToolStore:
    return ToolStore(tmp_path / "state" / "wasm")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture
def other_server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()
