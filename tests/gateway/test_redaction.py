"""One redaction point: no secret value reaches the state database (audit events of every
kind, decision reasons, the approvals table the dashboard and webhook show), a person's
approval prompt or the agent, and large arguments are stored bounded (issue 15 points 7, 8).

The agent knows a secret's value (as if it had read it somewhere) and uses it in commands,
an ask, a fetch, a failing call and a 1 MiB file; afterwards every byte of the database
files is searched for the value and its encodings. The control runs the same calls with
the secret not configured and finds the value, so the search would see a leak."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway
from agentvisor.state.asks import Answer, ApprovalRequest, render
from agentvisor.state.redaction import HEAD_CHARS
from tests.conftest import requires_bwrap

pytestmark = requires_bwrap

VALUE = "sk-live-7f3a9c2e1b8d4f60"
FORMS = [VALUE, base64.b64encode(VALUE.encode()).decode(), VALUE.encode().hex()]


class _Page(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"<html><body><p>hello</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def page() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Person:
    """Answers every ask in the shared queue with a deny, as a dashboard user would."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        queue = self.gateway.state.approvals
        with queue.present("test-person"):
            while not self._stop.is_set():
                for ask in queue.pending():
                    queue.answer(ask.id, Answer("deny", "web", "tester", "not now"))
                time.sleep(0.05)

    def __enter__(self) -> Person:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.gateway.state.approvals.answerers_present():
            assert time.monotonic() < deadline, "the person never became present"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@contextlib.contextmanager
def gateway(workspace: Path, tmp_path: Path, page: str, secret: bool) -> Iterator[Gateway]:
    secrets = [{"name": "PAY_KEY", "env": "PAY_KEY", "hosts": ["api.example.com"]}]
    config = config_from_dict(
        {
            "audit": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "approvals": {"timeout": 10},
            "rules": [{"decision": "allow", "kind": "fetch", "pattern": page}],
            "secrets": secrets if secret else [],
        }
    )
    gw = Gateway(config, workspace=workspace)
    try:
        yield gw
    finally:
        gw.close()


def use_the_value(gw: Gateway, page: str) -> dict[str, str]:
    """The calls, each carrying the value somewhere; returns what the agent read."""
    session = gw.open_session(agent="leaky", toolsets=["all"])
    content = f"{VALUE}\n" + "x" * (1 << 20)
    calls = {
        "echo": ("terminal", {"command": f"echo {VALUE}"}),
        "ask": ("terminal", {"command": f"sudo -n true {VALUE}"}),
        "fetch": ("web_extract", {"url": f"http://{page}/?key={VALUE}"}),
        "error": ("read_file", {"path": f"missing-{VALUE}.txt"}),
        "big": ("write_file", {"path": "big.txt", "content": content}),
    }
    with Person(gw):
        return {name: gw.call(session, tool, args).text for name, (tool, args) in calls.items()}


def stored_bytes(tmp_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))


def test_no_secret_value_is_stored_or_shown(
    workspace: Path, tmp_path: Path, page: str, isolated_home: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("PAY_KEY", VALUE)
    with gateway(workspace, tmp_path, page, secret=True) as gw:
        said = use_the_value(gw, page)
        person = gw.state.approvals.recent()
        events = gw.state.audit.events()
    for name, text in said.items():
        assert VALUE not in text, (name, text)
    assert "denied by a person" in said["ask"] and "{{secret:PAY_KEY}}" in said["echo"]
    assert person and all(VALUE not in str(ask.as_dict()) for ask in person)
    kinds = {e.kind for e in events}
    assert {"intent", "call", "approval", "network", "sandbox"} <= kinds
    assert all(VALUE not in str(e.as_dict()) for e in events)
    data = stored_bytes(tmp_path)
    for form in FORMS:
        assert form.encode() not in data, f"{form} is stored"

    # The 1 MiB argument: its head, its size and the hash of the redacted text.
    [big] = [e for e in events if e.kind == "call" and e.tool == "write_file"]
    stored = (big.arguments or {})["content"]
    whole = ("{{secret:PAY_KEY}}\n" + "x" * (1 << 20)).encode()
    assert len(stored) < HEAD_CHARS + 200 and stored.startswith("{{secret:PAY_KEY}}\nxxx")
    assert f"{len(whole)} bytes in all, sha256 {hashlib.sha256(whole).hexdigest()}" in stored
    assert len(data) < 1 << 20, "the database grew by the whole argument"


def test_control_without_the_secret_configured_the_value_is_found(
    workspace: Path, tmp_path: Path, page: str, isolated_home: Path
) -> None:
    with gateway(workspace, tmp_path, page, secret=False) as gw:
        said = use_the_value(gw, page)
    assert VALUE in said["echo"]
    assert VALUE.encode() in stored_bytes(tmp_path)


def test_a_person_is_shown_the_redacted_ask(
    workspace: Path, tmp_path: Path, page: str, isolated_home: Path, monkeypatch: Any
) -> None:
    """The channels (terminal prompt, webhook, dashboard) get the redacted request."""
    monkeypatch.setenv("PAY_KEY", VALUE)
    shown: list[ApprovalRequest] = []

    class Terminal:
        name = "terminal"

        def available(self) -> bool:
            return True

        def ask(self, request: ApprovalRequest, submit: Any) -> None:
            shown.append(request)
            submit(Answer("deny", self.name, "tester"))

        def cancel(self, request: ApprovalRequest, outcome: str) -> None:
            pass

    with gateway(workspace, tmp_path, page, secret=True) as gw:
        gw.broker.channels = [Terminal()]
        session = gw.open_session(toolsets=["all"])
        out = gw.call(session, "terminal", {"command": f"sudo -n true {VALUE}"})
    assert "denied by a person" in out.text
    [request] = shown
    assert VALUE not in render(request) and "{{secret:PAY_KEY}}" in render(request)
    # "session" and "always" would store the value in a grant or a rule: not offered.
    assert request.choices == ("once", "deny")
