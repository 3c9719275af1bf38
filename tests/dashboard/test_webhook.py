"""Webhook approvals against a real gateway: asks are POSTed signed to a target on
loopback; signed answers come back to /approvals/webhook. Bad signatures, old messages,
replays and approvers outside the allowlist are refused (and audited); the first answer
from any channel wins."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from agentvisor.approvals.webhook import signature, signed_headers
from agentvisor.config import config_from_dict
from agentvisor.errors import ConfigError
from tests.conftest import requires_bwrap
from tests.dashboard.conftest import (
    WEBHOOK_SECRET,
    one_call,
    pending_for,
    serve,
    wait_for,
    webhook_config,
)

SECRET = WEBHOOK_SECRET.encode()


def send_answer(
    gw,
    body: dict,
    *,
    secret: bytes = SECRET,
    now: float | None = None,
    raw: bytes | None = None,
    headers: dict | None = None,
) -> httpx.Response:
    data = raw if raw is not None else json.dumps(body).encode()
    sent = headers if headers is not None else signed_headers(secret, "answer", data, now)
    return httpx.post(gw.base + "/approvals/webhook", content=data, headers=sent, timeout=10)


@pytest.fixture
def hook_env(dash_env, receiver):
    dash_env["config"].write_text(webhook_config(receiver))
    dash_env["env"]["TEST_WEBHOOK_SECRET"] = WEBHOOK_SECRET
    return dash_env


def requested(receiver, command: str) -> dict:
    def find():
        return next(
            (
                m
                for m in receiver.payloads("approval.requested")
                if m["ask"]["action"]["target"] == command
            ),
            None,
        )

    return wait_for(find, 20, f"the webhook POST for {command!r}")


@requires_bwrap
def test_asks_are_posted_signed_and_a_signed_answer_completes_the_call(hook_env, receiver):
    with serve(hook_env) as gw:
        agent = one_call(gw.mcp, "sudo -n true")
        message = requested(receiver, "sudo -n true")
        headers, body = next(
            (h, b) for h, b in receiver.messages if json.loads(b)["type"] == "approval.requested"
        )
        # The target can check where the ask came from.
        expected = signature(SECRET, "ask", headers["x-agentvisor-timestamp"], body)
        assert headers["x-agentvisor-signature"] == expected
        assert abs(int(headers["x-agentvisor-timestamp"]) - time.time()) < 30
        ask = message["ask"]
        assert ask["reason"] and ask["rule"] == "category:privilege"
        assert "session" in ask["choices"] and message["rule_previews"]

        r = send_answer(gw, {"id": ask["id"], "choice": "once", "approver": "alice@example.com"})
        assert r.status_code == 200 and r.json()["accepted"] is True
        [(_, text)] = agent.wait()
        assert "Refused" not in text
        try:
            settled = wait_for(lambda: receiver.payloads("approval.settled"), 20, "settled")
        except AssertionError:  # say what the gateway recorded instead
            raise AssertionError(
                f"no approval.settled; audit: {gw.audit(kind='approval')}"
            ) from None
        assert settled[0]["id"] == ask["id"] and settled[0]["approver"] == "alice@example.com"
        answers = [
            e
            for e in gw.audit(kind="approval")
            if e["channel"] == "webhook" and e["result"].startswith("accepted")
        ]
        assert answers and answers[0]["approver"] == "alice@example.com"

        # The same signed message again is a replay: refused.
        raw = json.dumps(
            {"id": ask["id"], "choice": "deny", "approver": "alice@example.com"}
        ).encode()
        headers = signed_headers(SECRET, "answer", raw)
        first = send_answer(gw, {}, raw=raw, headers=headers)
        assert first.status_code == 409  # answered already (the signature itself was fine)
        again = send_answer(gw, {}, raw=raw, headers=headers)
        assert again.status_code == 401 and "replay" in again.json()["error"]


@requires_bwrap
def test_forged_stale_and_unknown_approver_answers_are_refused_and_audited(hook_env, receiver):
    with serve(hook_env) as gw:
        agent = one_call(gw.mcp, "sudo -n true")
        ask_id = requested(receiver, "sudo -n true")["ask"]["id"]
        answer = {"id": ask_id, "choice": "once", "approver": "alice@example.com"}

        wrong_key = send_answer(gw, answer, secret=b"not-the-secret-at-all-0000")
        assert wrong_key.status_code == 401 and "bad signature" in wrong_key.json()["error"]
        unsigned = send_answer(gw, answer, headers={"content-type": "application/json"})
        assert unsigned.status_code == 401
        # A signed body changed on the way (the approver swapped) no longer verifies.
        raw = json.dumps(answer).encode()
        headers = signed_headers(SECRET, "answer", raw)
        tampered = raw.replace(b"alice@example.com", b"mallory@example.com")
        assert send_answer(gw, {}, raw=tampered, headers=headers).status_code == 401
        # A message signed for the other direction (what the gateway sends) is refused.
        ask_direction = signed_headers(SECRET, "ask", raw)
        assert send_answer(gw, {}, raw=raw, headers=ask_direction).status_code == 401
        stale = send_answer(gw, answer, now=time.time() - 600)
        assert stale.status_code == 401 and "timestamp" in stale.json()["error"]

        mallory = send_answer(gw, {**answer, "approver": "mallory@example.com"})
        assert mallory.status_code == 403 and "not in webhooks.approvers" in mallory.json()["error"]
        assert send_answer(gw, {**answer, "approver": "*"}).status_code == 403
        assert send_answer(gw, {**answer, "choice": "yes"}).status_code == 400

        # None of these settled the ask; the refusals are in the audit log.
        assert [a["id"] for a in gw.pending()] == [ask_id]
        refused = [
            e for e in gw.audit(kind="approval", decision="refused") if e["channel"] == "webhook"
        ]
        assert any(e["approver"] == "mallory@example.com" for e in refused)
        assert any("bad signature" in e["result"] for e in refused)

        # Control: the allowlisted approver, correctly signed, is accepted.
        ok = send_answer(gw, {**answer, "choice": "deny", "reason": "not today"})
        assert ok.status_code == 200
        [(is_error, text)] = agent.wait()
        assert is_error and "not today" in text


@requires_bwrap
def test_first_answer_wins_between_webhook_and_dashboard(hook_env, receiver, page):
    with serve(hook_env) as gw:
        # Dashboard first, in the browser; the webhook's later answer is refused.
        agent = one_call(gw.mcp, "sudo -n true")
        ask_id = requested(receiver, "sudo -n true")["ask"]["id"]
        page.goto(gw.dashboard)
        card = page.locator("article.ask-card", has_text="sudo -n true")
        card.locator("button[data-choice=deny]").click()
        card.locator("textarea").fill("the dashboard said no")
        card.locator("button[data-confirm=deny]").click()
        [(is_error, text)] = agent.wait()
        assert is_error and "the dashboard said no" in text
        late = send_answer(gw, {"id": ask_id, "choice": "once", "approver": "alice@example.com"})
        assert late.status_code == 409
        assert "already answered" in late.json()["error"] and "via web" in late.json()["error"]

        # Webhook first; the open dashboard says who answered, and its late answer is
        # refused with a clear message.
        agent = one_call(gw.mcp, "sudo -n false")
        ask_id = requested(receiver, "sudo -n false")["ask"]["id"]
        card = page.locator("article.ask-card", has_text="sudo -n false")
        card.wait_for()
        r = send_answer(gw, {"id": ask_id, "choice": "once", "approver": "alice@example.com"})
        assert r.status_code == 200
        assert "Refused" not in agent.wait()[0][1]
        page.locator(".toast", has_text="alice@example.com via webhook").wait_for()
        card.wait_for(state="detached")
        dashboard_late = gw.post(f"/approvals/{ask_id}", {"choice": "deny"})
        assert dashboard_late.status_code == 409
        assert "alice@example.com via webhook" in dashboard_late.json()["message"]


@requires_bwrap
def test_failed_deliveries_are_audited(dash_env, receiver):
    dash_env["config"].write_text(
        webhook_config(receiver).replace(receiver.url, "http://127.0.0.1:9/nothing-listens-here")
    )
    dash_env["env"]["TEST_WEBHOOK_SECRET"] = WEBHOOK_SECRET
    with serve(dash_env) as gw:
        agent = one_call(gw.mcp, "sudo -n true")
        ask = pending_for(gw, "sudo -n true")
        failed = wait_for(
            lambda: [e for e in gw.audit(kind="approval") if "delivery" in (e["result"] or "")],
            20,
            "the failure",
        )
        assert failed[0]["ref"] == ask["id"] and failed[0]["channel"] == "webhook"
        assert gw.post(f"/approvals/{ask['id']}", {"choice": "deny"}).status_code == 200
        agent.wait()


def test_webhooks_need_a_secret_and_named_approvers():
    base = {"targets": ["https://chat.example/hook"], "secret_env": "S"}
    with pytest.raises(ConfigError, match="approvers"):
        config_from_dict({"webhooks": base})
    with pytest.raises(ConfigError, match="wildcards"):
        config_from_dict({"webhooks": {**base, "approvers": ["*"]}})
    with pytest.raises(ConfigError, match="secret"):
        config_from_dict({"webhooks": {"targets": base["targets"], "approvers": ["a"]}})
    with pytest.raises(ConfigError, match="http"):
        config_from_dict({"webhooks": {**base, "approvers": ["a"], "targets": ["ftp://x"]}})
    config_from_dict({"webhooks": {**base, "approvers": ["alice@example.com"]}})  # control


def test_the_dashboard_token_is_long_and_not_the_agents_token():
    with pytest.raises(ConfigError, match="16 characters"):
        config_from_dict({"dashboard": {"token": "short"}})
    same = "x" * 20
    with pytest.raises(ConfigError, match=r"not gateway\.token"):
        config_from_dict({"dashboard": {"token": same}, "gateway": {"token": same}})
    config_from_dict({"dashboard": {"token": "y" * 20}, "gateway": {"token": same}})


def test_a_missing_or_short_secret_stops_the_gateway(dash_env, receiver):
    dash_env["config"].write_text(webhook_config(receiver))
    dash_env["env"]["TEST_WEBHOOK_SECRET"] = "short"
    with pytest.raises(RuntimeError, match="shorter than 16"), serve(dash_env):
        pass
