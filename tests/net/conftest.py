"""Fixtures for the network tests: loopback HTTP(S) servers and a test CA."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from .helpers import LoopbackOnlyDialer, Server


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture(scope="session")
def ca() -> Any:
    trustme = pytest.importorskip("trustme")
    return trustme.CA()


@pytest.fixture
def tls_server(ca: Any) -> Iterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1", "secure.test").configure_cert(context)
    s = Server(tls=context)
    yield s
    s.close()


@pytest.fixture
def client_ssl(ca: Any) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture
def dialer() -> LoopbackOnlyDialer:
    return LoopbackOnlyDialer()
