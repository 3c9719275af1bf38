"""Approvals through webhooks: pending asks are POSTed, signed, to configured URLs, and
signed answers come back to ``POST /approvals/webhook`` on the gateway.

Signing (both directions, HMAC-SHA256 with the shared secret ``webhooks.secret_*``):

    X-Agentvisor-Timestamp: 1767225600                 (unix seconds)
    X-Agentvisor-Signature: v1=HEX(HMAC(secret, PURPOSE + "\\n" + TIMESTAMP + "\\n" + BODY))

PURPOSE is ``ask`` for what the gateway sends and ``answer`` for what it receives, so a
message can never be played back in the other direction. A message older or newer than
``webhooks.max_age`` is refused, and a signature is accepted only once.

Who may answer is ``webhooks.approvers``, a list of exact identities; an answer from
anyone else is refused and audited. Answers go through the shared approval queue, so the
first answer from any channel (dashboard, terminal, webhook, another gateway) wins and a
later one gets a clear refusal.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ConfigError
from ..records import Declared
from ..state.asks import Answer

CHANNEL = "webhook"
TIMESTAMP_HEADER = "x-agentvisor-timestamp"
SIGNATURE_HEADER = "x-agentvisor-signature"
MAX_BODY = 64 * 1024
_CHOICES = ("once", "session", "always", "deny")


def load_secret(config: Any) -> bytes:
    """The HMAC key from ``webhooks.secret_env`` or ``webhooks.secret_file``."""
    hooks = config.webhooks
    if hooks.secret_env is not None:
        value = os.environ.get(hooks.secret_env, "")
        where = f"the environment variable {hooks.secret_env} (webhooks.secret_env)"
    else:
        path = os.path.expanduser(hooks.secret_file or "")
        try:
            with open(path, encoding="utf-8") as f:
                value = f.read().strip()
        except OSError as exc:
            raise ConfigError(f"webhooks.secret_file: cannot read {path}: {exc.strerror}") from None
        where = f"{path} (webhooks.secret_file)"
    if len(value) < 16:
        raise ConfigError(f"the webhook secret in {where} is missing or shorter than 16 characters")
    return value.encode()


def signature(secret: bytes, purpose: str, timestamp: str, body: bytes) -> str:
    message = purpose.encode() + b"\n" + timestamp.encode() + b"\n" + body
    return "v1=" + hmac.new(secret, message, hashlib.sha256).hexdigest()


def signed_headers(
    secret: bytes, purpose: str, body: bytes, now: float | None = None
) -> dict[str, str]:
    timestamp = str(int(now if now is not None else time.time()))
    return {
        "content-type": "application/json",
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: signature(secret, purpose, timestamp, body),
    }


# -- outbound: asks to the targets ---------------------------------------------------------


class WebhookNotifier:
    """Watches the approval queue and POSTs each new ask, then its outcome, to every target.

    While it runs, the queue counts a person as reachable through ``webhook``.
    """

    def __init__(
        self,
        config: Any,
        secret: bytes,
        queue: Any,
        audit: Any,
        post: Callable[[str, bytes, dict[str, str]], None] | None = None,
    ) -> None:
        self.hooks = config.webhooks
        self.secret = secret
        self.queue = queue
        self.audit = audit
        self.post = post or self._post
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._presence: contextlib.ExitStack | None = None

    def start(self) -> WebhookNotifier:
        self._presence = contextlib.ExitStack()
        self._presence.enter_context(self.queue.present(CHANNEL))
        self._thread = threading.Thread(
            target=self._run, daemon=True, name="agentvisor-webhook-notifier"
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._presence is not None:
            self._presence.close()

    def _run(self) -> None:
        sent: set[str] = set()
        while not self._stop.is_set():
            try:
                pending = {ask.id: ask for ask in self.queue.pending()}
                for ask_id, ask in pending.items():
                    if ask_id not in sent:
                        sent.add(ask_id)
                        self._deliver(ask_payload(ask, self.hooks.callback_url), ask_id)
                for ask_id in sent - set(pending):
                    sent.discard(ask_id)
                    settled = self.queue.get(ask_id)
                    if settled is not None:
                        self._deliver(settled_payload(settled), ask_id)
            except Exception as exc:  # keep notifying: one bad round must not end it
                self._audit_failure("the approval queue", exc)
            self.queue.wait_for_change(1.0)

    def _deliver(self, payload: dict[str, Any], ask_id: str) -> None:
        body = json.dumps(payload).encode()
        for url in self.hooks.targets:
            try:
                self.post(url, body, signed_headers(self.secret, "ask", body))
            except Exception as exc:
                self._audit_failure(url, exc, ask_id)

    def _post(self, url: str, body: bytes, headers: dict[str, str]) -> None:
        import httpx

        response = httpx.post(url, content=body, headers=headers, timeout=self.hooks.timeout)
        response.raise_for_status()

    def _audit_failure(self, where: str, exc: Exception, ask_id: str | None = None) -> None:
        from ..state.events import AuditEvent

        self.audit.record(
            AuditEvent(
                kind="approval",
                channel=CHANNEL,
                ref=ask_id,
                result=f"webhook delivery to {where} failed: {exc}"[:500],
            )
        )


def ask_payload(ask: Any, callback_url: str | None) -> dict[str, Any]:
    data = ask.as_dict()
    data.pop("answer", None)
    return {
        "type": "approval.requested",
        "callback_url": callback_url,
        "rule_previews": rule_previews(data),
        "ask": data,
    }


def settled_payload(ask: Any) -> dict[str, Any]:
    data = ask.as_dict()
    answer = data.get("answer") or {}
    return {
        "type": "approval.settled",
        "id": data["id"],
        "status": data["status"],
        "outcome": data.get("outcome"),
        "choice": answer.get("choice"),
        "approver": answer.get("approver"),
        "channel": answer.get("channel"),
    }


def rule_previews(ask: dict[str, Any]) -> list[str]:
    """The allow rules an "always" answer would write, as they will be written."""
    if "always" not in ask.get("choices", ()):
        return []
    from ..actions import Action, Context, Decision
    from ..state.asks import ApprovalRequest
    from .rulefile import rule_entries

    action = ask["action"]
    request = ApprovalRequest(
        Action(action["kind"], action["target"]),
        Context(session=ask.get("session")),
        Decision("ask", ask.get("reason") or "", patterns=tuple(ask.get("patterns") or ())),
    )
    return rule_entries(request)


# -- inbound: answers to the gateway ------------------------------------------------------


class Reply(Declared):
    status: int
    body: dict[str, Any]


class WebhookReceiver:
    """Checks a signed answer and passes it to the approval queue."""

    def __init__(
        self,
        config: Any,
        secret: bytes,
        queue: Any,
        audit: Any,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.hooks = config.webhooks
        self.approvers = frozenset(self.hooks.approvers)
        self.secret = secret
        self.queue = queue
        self.audit = audit
        self.clock = clock
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def handle(self, headers: Mapping[str, str], body: bytes, peer: str = "?") -> Reply:
        problem = self._check_signature(headers, body)
        if problem is not None:
            self._audit_refusal(None, f"refused a webhook answer from {peer}: {problem}")
            return Reply(401, {"accepted": False, "error": problem})
        try:
            data = json.loads(body)
            ask_id, choice, approver = data["id"], data["choice"], data["approver"]
            reason, config_file = data.get("reason") or "", data.get("config_file")
            if not all(isinstance(v, str) for v in (ask_id, choice, approver, reason)) or not (
                config_file is None or isinstance(config_file, str)
            ):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return Reply(
                400,
                {
                    "accepted": False,
                    "error": "the body must be JSON with string "
                    "fields id, choice, approver (and optional reason, "
                    "config_file)",
                },
            )
        if choice not in _CHOICES:
            return Reply(
                400, {"accepted": False, "error": f"choice must be one of {', '.join(_CHOICES)}"}
            )
        if approver not in self.approvers:
            self._audit_refusal(data, f"refused: {approver!r} is not in webhooks.approvers")
            return Reply(
                403,
                {
                    "accepted": False,
                    "error": f"{approver!r} may not answer approvals (not in webhooks.approvers)",
                },
            )
        if self.queue.get(ask_id) is None:
            return Reply(404, {"accepted": False, "error": f"no ask {ask_id!r}"})
        result = self.queue.answer(ask_id, Answer(choice, CHANNEL, approver, reason, config_file))
        if not result:
            return Reply(409, {"accepted": False, "error": f"not applied: {result.message}"})
        return Reply(200, {"accepted": True, "message": result.message})

    def _check_signature(self, headers: Mapping[str, str], body: bytes) -> str | None:
        timestamp = headers.get(TIMESTAMP_HEADER, "")
        given = headers.get(SIGNATURE_HEADER, "")
        if not timestamp.isdigit() or not given:
            return "missing or malformed signature headers"
        expected = signature(self.secret, "answer", timestamp, body)
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return "bad signature"
        now = self.clock()
        if abs(now - int(timestamp)) > self.hooks.max_age:
            return f"the timestamp is more than {self.hooks.max_age:g} s away from now"
        with self._lock:
            for sig, until in list(self._seen.items()):
                if until < now:
                    del self._seen[sig]
            if expected in self._seen:
                return "this signed message was already received (replay)"
            self._seen[expected] = int(timestamp) + self.hooks.max_age
        return None

    def _audit_refusal(self, data: dict[str, Any] | None, what: str) -> None:
        from ..state.events import AuditEvent

        ask = self.queue.get(data["id"]) if data and isinstance(data.get("id"), str) else None
        approver = data.get("approver") if data else None
        self.audit.record(
            AuditEvent(
                kind="approval",
                session=getattr(ask, "session", None),
                agent=getattr(ask, "agent", None),
                tool=getattr(ask, "tool", None),
                arguments={"choice": data.get("choice")} if data else None,
                decision="refused",
                approver=str(approver) if approver else None,
                channel=CHANNEL,
                ref=getattr(ask, "id", None),
                result=what[:500],
            )
        )
