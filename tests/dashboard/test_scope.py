"""A person widens a live session's task scope from the dashboard's session page."""

from __future__ import annotations

import json

from agentvisor.paths import state_dir
from agentvisor.state.scopes import SCOPES_FILE
from tests.conftest import requires_bwrap
from tests.dashboard.conftest import one_call, pending_for, serve

pytestmark = requires_bwrap


def test_a_person_adds_to_a_sessions_scope(dash_env, isolated_home):
    with serve(dash_env) as gw:
        # A call that waits for a person keeps the agent's session live meanwhile.
        agent = one_call(gw.mcp, "echo approve-me now")
        ask = pending_for(gw, "approve-me", agent=agent)
        [session] = gw.api("/sessions").json()["sessions"]
        assert session["scope"] == {}
        path = f"/sessions/{session['id']}/scope"

        wrong = gw.post(path, {"field": "recipients", "value": "bob@example.com"})
        assert wrong.status_code == 400 and "unknown scope field" in wrong.json()["message"]
        added = gw.post(path, {"field": "recipient", "value": "bob@example.com"})
        assert added.status_code == 200, added.text

        [session] = gw.api("/sessions").json()["sessions"]
        assert session["scope"] == {"recipient": ["bob@example.com"]}
        on_host = json.loads((state_dir() / SCOPES_FILE).read_text())
        assert on_host == {session["id"]: {"recipient": ["bob@example.com"]}}
        [event] = [e for e in gw.audit() if e.get("tool") == "scope"]
        assert event["arguments"] == {"recipient": "bob@example.com"}
        assert gw.post("/sessions/s-none/scope", {"field": "host", "value": "x"}).status_code == 404

        gw.post(f"/approvals/{ask['id']}", {"choice": "deny"})
        agent.wait()
