"""The dashboard's Changes page: pending changesets with a readable diff, apply and discard
per path, each audited with the person's name."""

from __future__ import annotations

from tests.dashboard.conftest import Agent, screenshot, serve, wait_for

PLANT = "printf 'use flake\\n' > .envrc\nmkdir -p sub && printf 'export X=1\\n' > sub/.envrc\n"


def test_a_person_applies_and_discards_held_changes_in_the_browser(dash_env, page):
    ws = dash_env["ws"]
    with serve(dash_env) as gw:
        agent = Agent(
            gw.mcp,
            [
                ("write_file", {"path": "plant.sh", "content": PLANT}),
                ("terminal", {"command": "bash plant.sh"}),
            ],
            agent="changes-agent",
        )
        results = agent.wait()
        assert "wait for a person" in results[-1][1], results
        assert not (ws / ".envrc").exists() and (ws / "plant.sh").exists()

        page.goto(gw.dashboard + "#changes")
        held = page.locator(".change[data-path='.envrc']")
        held.wait_for()
        assert "direnv" in held.inner_text() and "+use flake" in held.inner_text()
        screenshot(page, "changes")
        held.get_by_role("button", name="Apply").click()
        wait_for(lambda: (ws / ".envrc").exists(), what="the applied .envrc")
        assert (ws / ".envrc").read_text() == "use flake\n"

        other = page.locator(".change[data-path='sub/.envrc']")
        other.get_by_role("button", name="Discard").click()
        wait_for(lambda: not other.count(), what="the discarded change to go")
        assert not (ws / "sub" / ".envrc").exists()

        events = [e for e in gw.audit(kind="changes") if e.get("channel") == "web"]
        assert sorted(e["decision"] for e in events) == ["apply", "discard"]
        assert all(e["approver"] for e in events)
