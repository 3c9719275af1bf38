"""Fixtures for the state tests: a SQLite file, and a real PostgreSQL server.

The server is started once per test run from the Debian package (`make test` installs
``postgresql`` when missing) and stopped at the end; each test gets its own database.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.state.pgserver import PgServer, bindir


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    if bindir() is None:
        pytest.skip("PostgreSQL is not installed (make test installs the postgresql package)")
    server = PgServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    from agentvisor.state import db

    url = pg_server.create_database()
    try:
        yield url
    finally:
        _forget(db, url)
        pg_server.drop_database(url)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> Iterator[str]:
    from agentvisor.state import db

    url = f"sqlite:///{tmp_path / 'state' / 'state.db'}"
    yield url
    _forget(db, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request: pytest.FixtureRequest) -> str:
    """Each test that takes it runs on SQLite and on PostgreSQL."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


def _forget(db_module, url: str) -> None:
    """Close this process's engine for ``url`` (the database is about to go away)."""
    key = db_module.normalize_url(url).render_as_string(hide_password=False)
    found = db_module._cache.pop(key, None)
    if found is not None:
        found.close()
