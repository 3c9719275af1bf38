"""Issue 16: a grant by a refusal's id from the dashboard's API. The page reads what the id
stands for, and a grant is made only when the person confirms exactly those patterns."""

from __future__ import annotations

import re

from tests.dashboard.conftest import one_call, pending_for, serve

AWKWARD = 'git push --force origin "it\'s"'


def test_a_grant_by_id_confirms_exactly_what_the_id_stands_for(dash_env):
    with serve(dash_env) as gw:
        agent = one_call(gw.mcp, AWKWARD)
        ask = pending_for(gw, "it's", agent=agent)
        assert gw.post(f"/approvals/{ask['id']}", {"choice": "deny"}).status_code == 200
        [(is_error, text)] = agent.wait()
        found = re.search(r"agentvisor grant --ask (c-[0-9a-f]{12}) --for 30m", text)
        assert is_error and found, text
        refusal = found.group(1)

        shown = gw.api(f"/refusals/{refusal}").json()["refusal"]
        assert shown["target"] == AWKWARD and shown["kind"] == "exec"
        assert shown["patterns"] == ["git push --force origin 'it'\"'\"'s'"]
        # Patterns other than the ones the id stands for are refused: nothing is granted.
        wider = {"ask": refusal, "duration": "30m", "patterns": ["git push *"]}
        r = gw.post("/grants", wider)
        assert r.status_code == 400 and "not what" in r.json()["message"]
        assert gw.post("/grants", {"ask": refusal}).status_code == 400  # none confirmed
        assert gw.api("/grants").json()["grants"] == []

        confirmed = {"ask": refusal, "duration": "30m", "patterns": shown["patterns"]}
        r = gw.post("/grants", confirmed)
        assert r.status_code == 200, r.text
        [made] = r.json()["grants"]
        assert made["pattern"] == shown["patterns"][0] and made["session"] == shown["session"]
        assert made["created_by"].startswith("web:")
        assert gw.post("/grants", confirmed).status_code == 400  # an id grants once
        assert gw.api("/refusals/c-000000000000").status_code == 404
