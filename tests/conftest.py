"""Shared fixtures: paths to the repo, the CLI, and the shared corpus when present."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# A gateway the developer runs (`make run`) must not take over the tests' `agentvisor exec`
# calls; the exec server's own tests start their gateway and clear this.
os.environ["AGENTVISOR_NO_GATEWAY"] = "1"
# Tests that do not take `isolated_home` still never read or write the user's real state
# (audit database, changesets, exec helper): a state directory of this test run only.
TEST_STATE = tempfile.mkdtemp(prefix="agentvisor-test-state-")
os.environ["XDG_STATE_HOME"] = TEST_STATE

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
AGENTVISOR = str(Path(sys.executable).with_name("agentvisor"))


@pytest.fixture
def shared_corpus() -> Path:
    corpus = SHARED / "corpus"
    if not corpus.is_dir():
        pytest.skip(f"the shared corpus is not beside this checkout ({corpus})")
    return corpus


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake $HOME (and XDG dirs) so tests never read or write the real one."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    return home


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTVISOR, *args],
        cwd=cwd,
        env=env,
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


requires_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (make install)"
)
is_root = os.getuid() == 0


# Tiers: `make check` runs the fast tier (-m "not docker and not postgres and not browser and not
# sandbox and not slow"); `make test` runs everything. Markers follow from what a test needs, so
# nobody has to remember to add them: a module marked `requires_bwrap` starts real sandboxes.
_NEEDS = {
    "docker": ("tests/docker/",),
    "browser": ("tests/dashboard/",),
    "sandbox": ("tests/sandbox/", "tests/changes/", "tests/upstreams/", "tests/test_escapes.py"),
}


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(TEST_STATE, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = Path(str(item.fspath)).relative_to(REPO).as_posix()
        for marker, prefixes in _NEEDS.items():
            if where.startswith(prefixes):
                item.add_marker(marker)
        if any(
            "bubblewrap" in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")
        ):
            item.add_marker("sandbox")
        fixtures = getattr(item, "fixturenames", ())
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and callspec.params.get("any_url") == "postgresql"
        if "pg_server" in fixtures or "pg_url" in fixtures or on_postgres:
            item.add_marker("postgres")
