"""The dashboard in a real headless Chromium: an agent's call asks over MCP, a person
answers in the browser, and the agent sees the outcome. Screenshots of the main views go
to screenshots/dashboard-*.png."""

from __future__ import annotations

import re

import yaml

from tests.conftest import requires_bwrap
from tests.dashboard.conftest import Agent, one_call, pending_for, screenshot, serve, wait_for

pytestmark = requires_bwrap


def card(page, text):
    return page.locator("article.ask-card", has_text=text)


def test_approve_once_in_the_browser_completes_the_call(dash_env, page):
    with serve(dash_env) as gw:
        page.goto(gw.dashboard)
        page.get_by_text("Nothing is waiting for you.").wait_for()
        page.locator("#live.on").wait_for()
        # The ask arrives over the live event stream, without a reload.
        agent = one_call(gw.mcp, "echo approve-me 42", agent="claude-test")
        ask = card(page, "echo approve-me 42")
        ask.wait_for(timeout=20_000)
        # What, why (the decision's reason and rule), and who asked.
        assert "needs approval by" in ask.inner_text()
        assert "rules[0]" in ask.locator(".why").inner_text()
        facts = ask.locator(".ask-body > .facts").inner_text()
        assert ask_session(gw) in facts and "claude-test" in facts and "terminal" in facts
        assert page.locator("#count-approvals").inner_text() == "1"
        screenshot(page, "approvals")

        ask.locator("button[data-choice=once]").click()
        [(is_error, text)] = agent.wait()
        assert not is_error and "approve-me 42" in text
        ask.wait_for(state="detached")
        page.get_by_text("Nothing is waiting for you.").wait_for()
        settled = page.locator("#settled li").first
        settled.get_by_text("echo approve-me 42").wait_for()
        assert "via web" in settled.inner_text()

        # The answer is audited with the person and the channel.
        answers = [e for e in gw.audit(kind="approval") if e["channel"] == "web"]
        assert answers and answers[0]["result"].startswith("accepted: once")
        assert answers[0]["approver"]

        # The live feed shows the completed call.
        page.click("nav a[data-view=activity]")
        page.locator("#feed li", has_text="terminal: echo approve-me 42").wait_for()
        screenshot(page, "activity")


def ask_session(gw):
    return gw.pending()[0]["session"]


def test_deny_with_a_reason_reaches_the_agent(dash_env, page):
    with serve(dash_env) as gw:
        agent = one_call(gw.mcp, "sudo ls /root")
        pending_for(gw, "sudo ls /root")
        page.goto(gw.dashboard)
        ask = card(page, "sudo ls /root")
        ask.locator(".chip", has_text="privilege").wait_for()
        assert "category:privilege" in ask.inner_text()
        ask.locator("button[data-choice=deny]").click()
        ask.locator("textarea").fill("not on this machine; use the staging box")
        screenshot(page, "deny")
        ask.locator("button[data-confirm=deny]").click()
        [(is_error, text)] = agent.wait()
        assert is_error and "Refused" in text
        assert "not on this machine; use the staging box" in text


def test_session_answer_lets_the_same_command_through_in_that_session(dash_env, page):
    with serve(dash_env) as gw:
        agent = Agent(
            gw.mcp,
            [("terminal", {"command": "sudo -n true"}), ("terminal", {"command": "sudo -n true"})],
        )
        page.goto(gw.dashboard)
        card(page, "sudo -n true").locator("button[data-choice=session]").click()
        results = agent.wait()
        # Both calls ran (sudo itself fails inside the sandbox: no_new_privs); the second
        # was not asked about: a grant bound to the session allowed it.
        assert len(results) == 2 and all("Refused" not in text for _, text in results)
        asks = [e for e in gw.audit(kind="approval") if e["decision"] == "ask"]
        assert len(asks) == 1
        # Another session is still asked.
        other = one_call(gw.mcp, "sudo -n true")
        ask = pending_for(gw, "sudo -n true", agent=other)
        assert gw.post(f"/approvals/{ask['id']}", {"choice": "deny"}).status_code == 200
        assert other.wait()[0][0] is True


def test_always_shows_the_rule_and_writes_it_to_the_chosen_file(dash_env, page):
    config = dash_env["config"]
    with serve(dash_env) as gw:
        agent = one_call(gw.mcp, "sudo ls /tmp")
        pending_for(gw, "sudo ls /tmp")
        page.goto(gw.dashboard)
        ask = card(page, "sudo ls /tmp")
        ask.locator("button[data-choice=always]").click()
        radios = ask.locator("input[type=radio]")
        assert radios.first.get_attribute("value") == str(config)
        assert radios.first.is_checked()
        preview = ask.locator(".rule-preview").inner_text()
        assert "decision: allow" in preview and 'pattern: "sudo ls /tmp"' in preview
        screenshot(page, "always")
        ask.locator("button[data-confirm=always]").click()
        [(_, text)] = agent.wait()
        assert "Refused" not in text
    rules = yaml.safe_load(config.read_text())["rules"]
    assert {"decision": "allow", "kind": "exec", "pattern": "sudo ls /tmp"}.items() <= rules[
        -1
    ].items()


def test_views_sessions_grants_policy_audit(dash_env, page):
    with serve(dash_env) as gw:
        waiting = one_call(gw.mcp, "echo approve-me tour", agent="tour-agent")
        ask = pending_for(gw, "echo approve-me tour")

        page.goto(gw.dashboard + "#sessions")
        session = page.locator(f".session[data-session={ask['session']}]")
        session.wait_for()
        assert "tour-agent" in session.inner_text() and "bwrap" in session.inner_text()
        screenshot(page, "sessions")

        page.click("nav a[data-view=grants]")
        form = page.locator("#grant-form")
        form.locator("select[name=kind]").select_option("fetch")
        form.locator("input[name=pattern]").fill("pypi.org")
        form.locator("input[name=reason]").fill("installing the project's dependencies")
        form.locator("select[name=duration]").select_option("2h")
        form.locator("button[type=submit]").click()
        row = page.locator("#grants tr", has_text="pypi.org")
        row.wait_for()
        assert "in 2.0 h" in row.inner_text() and "web:" in row.inner_text()
        form.locator("select[name=kind]").select_option("exec")
        form.locator("input[name=pattern]").fill("git push *")
        form.locator("button[type=submit]").click()
        page.locator("#grants tr", has_text="git push *").wait_for()
        screenshot(page, "grants")
        grants = gw.api("/grants").json()["grants"]
        assert {g["pattern"] for g in grants} == {"pypi.org", "git push *"}
        page.locator("#grants tr", has_text="git push *").get_by_role(
            "button", name="Revoke"
        ).click()
        wait_for(
            lambda: not page.locator("#grants tr", has_text="git push *").locator("button").count(),
            what="the revoked grant to lose its button",
        )
        active = [g["pattern"] for g in gw.api("/grants").json()["grants"] if g["active"]]
        assert active == ["pypi.org"]

        page.click("nav a[data-view=policy]")
        rules = page.locator("#policy table").first
        rules.get_by_text("echo approve-me *").wait_for()
        assert "pypi.org" in page.locator("#policy").inner_text()  # the active grant
        privilege = page.locator(".cat", has_text="privilege")
        assert "ask" in privilege.inner_text()
        assert "deny" in page.locator(".cat", has_text="fork_bomb").inner_text()
        screenshot(page, "policy")

        page.click("nav a[data-view=audit]")
        page.fill("#audit-form input[name=q]", "pypi.org")
        page.click("#audit-form button[type=submit]")
        # The table is replaced when the search answers: wait for that, not for old rows.
        page.wait_for_function(
            "() => { const rows = [...document.querySelectorAll('#audit tr.row')];"
            " return rows.length > 0 && rows.every(r => r.innerText.includes('pypi.org')); }"
        )
        rows = page.locator("#audit tr.row")
        assert rows.count() >= 1
        assert all("pypi.org" in rows.nth(i).inner_text() for i in range(rows.count()))
        page.fill("#audit-form input[name=q]", "")
        page.select_option("#audit-form select[name=kind]", "sandbox")
        page.click("#audit-form button[type=submit]")
        page.locator("#audit tr.row", has_text="session opened").first.wait_for()
        kinds = set(page.locator("#audit tr.row .kind").all_inner_texts())
        assert {k.lower() for k in kinds} == {"sandbox"}
        page.locator("#audit tr.row").first.click()
        assert re.search(r'"kind": "sandbox"', page.locator("#audit tr.more").first.inner_text())
        page.select_option("#audit-form select[name=kind]", "")
        page.click("#audit-form button[type=submit]")
        page.locator("#audit tr.row", has_text="grant").first.wait_for()
        screenshot(page, "audit")

        assert gw.post(f"/approvals/{ask['id']}", {"choice": "once"}).status_code == 200
        assert "approve-me tour" in waiting.wait()[0][1]
