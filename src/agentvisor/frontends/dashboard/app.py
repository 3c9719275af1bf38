"""The dashboard's routes, mounted into the app `agentvisor serve` runs.

    GET  /                          → /dashboard/
    GET  /dashboard/                the page (static HTML, CSS, JS; no build step)
    GET  /dashboard/login           token login (when one is needed, see auth.py)
    GET  /dashboard/api/...         me, approvals, sessions, grants, refusals, policy, audit
    POST /dashboard/api/...         answers, grants (also by a refusal's id), revocations,
                                    ending a session
    GET  /dashboard/api/events      server-sent events (feed.py)
    POST /approvals/webhook         signed answers from a webhook (approvals/webhook.py)

Nothing is decided here: answers go to the shared approval queue, grants to the grant
store, and both are audited there with the person's name and the channel ``web``.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

from ...errors import AgentvisorError
from ...state.asks import Answer
from ...state.events import AuditEvent
from . import views
from .auth import COOKIE, Access, Person, origin_ok
from .feed import Feed

if TYPE_CHECKING:
    from starlette.types import ASGIApp

STATIC = Path(__file__).with_name("static")
CHANNEL = "web"
PREFIX = "/dashboard"
WEBHOOK_PATH = "/approvals/webhook"
# Paths that do their own authentication instead of the MCP bearer token.
OPEN_PATHS = ("/", PREFIX, WEBHOOK_PATH)
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_CHOICES = ("once", "session", "always", "deny")
_MAX_REASON = 1000

Handler = Callable[[Request, Person], Awaitable[Response]]


def dashboard_token(config: Any) -> str | None:
    return os.environ.get("AGENTVISOR_DASHBOARD_TOKEN") or config.dashboard.token


class Dashboard:
    """The dashboard and the webhook endpoint of one gateway."""

    def __init__(self, gateway: Any, *, host: str) -> None:
        config = gateway.config
        self.gateway = gateway
        self.enabled = config.dashboard.enabled
        self.state = state = gateway.state  # audit, grants, the shared approval queue
        self.access = Access(
            bind_host=host,
            login=config.dashboard.login,
            token=dashboard_token(config),
            login_hours=config.dashboard.login_hours,
        )
        # Tool calls waiting for a person hold the default worker threads; answers must
        # never wait behind them.
        self.limiter = anyio.CapacityLimiter(4)
        self.feed = Feed(state)
        self.notifier: Any = None
        self.receiver: Any = None
        if config.webhooks.targets:
            from ...approvals.webhook import WebhookNotifier, WebhookReceiver, load_secret

            secret = load_secret(config)
            self.notifier = WebhookNotifier(config, secret, state.approvals, state.audit)
            self.receiver = WebhookReceiver(config, secret, state.approvals, state.audit)
        self._presence = contextlib.ExitStack()

    def start(self) -> Dashboard:
        if self.enabled:
            self._presence.enter_context(self.state.approvals.present(CHANNEL))
            self.feed.start()
        if self.notifier is not None:
            self.notifier.start()
        return self

    def stop(self) -> None:
        if self.notifier is not None:
            self.notifier.stop()
        self.feed.stop()
        self._presence.close()

    @property
    def locked_reason(self) -> str | None:
        """Why nobody can log in, when a login is needed and there is no token."""
        if self.access.token:
            return None
        return (
            "dashboard.token is not set (nor AGENTVISOR_DASHBOARD_TOKEN), so the "
            "dashboard cannot be opened from here"
        )

    def routes(self) -> list[Any]:
        out: list[Any] = []
        if self.receiver is not None:
            out.append(Route(WEBHOOK_PATH, self.webhook, methods=["POST"]))
        if not self.enabled:
            return out
        g = self._guard
        api = [
            Route("/", g(self.page, page=True)),
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/api/logout", g(self.logout, write=True), methods=["POST"]),
            Route("/api/me", g(self.me)),
            Route("/api/approvals", g(self.approvals)),
            Route("/api/approvals/{ask_id}", g(self.answer, write=True), methods=["POST"]),
            Route("/api/sessions", g(self.sessions)),
            Route(
                "/api/sessions/{session_id}/end", g(self.end_session, write=True), methods=["POST"]
            ),
            Route(
                "/api/sessions/{session_id}/scope", g(self.add_scope, write=True), methods=["POST"]
            ),
            Route("/api/changes", g(self.changes)),
            Route("/api/changes/apply", g(self.apply_changes, write=True), methods=["POST"]),
            Route("/api/changes/discard", g(self.discard_changes, write=True), methods=["POST"]),
            Route("/api/grants", g(self.grants)),
            Route("/api/grants", g(self.add_grant, write=True), methods=["POST"]),
            Route(
                "/api/grants/{grant_id}/revoke", g(self.revoke_grant, write=True), methods=["POST"]
            ),
            Route("/api/refusals/{refusal_id}", g(self.refusal)),
            Route("/api/policy", g(self.policy)),
            Route("/api/audit", g(self.audit)),
            Route("/api/events", g(self.events)),
            Mount("/static", StaticFiles(directory=STATIC)),
        ]
        sub = Starlette(routes=api)
        out += [
            Route("/", lambda _: RedirectResponse(PREFIX + "/", 307)),
            Mount(PREFIX, app=cast("ASGIApp", _SecurityHeaders(sub))),
        ]
        return out

    # -- plumbing -----------------------------------------------------------------------

    def _guard(
        self, handler: Handler, *, page: bool = False, write: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not self.access.host_ok(request):
                return JSONResponse(
                    {
                        "error": "this Host header is not accepted here "
                        "(open the dashboard at 127.0.0.1 or localhost)"
                    },
                    403,
                )
            person = self.access.person(request)
            if person is None:
                if page:
                    return RedirectResponse(PREFIX + "/login", 303)
                return JSONResponse({"error": "log in first"}, 401)
            if write and not self.access.csrf_ok(request, person):
                return JSONResponse({"error": "missing or wrong CSRF token or Origin"}, 403)
            return await handler(request, person)

        return endpoint

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter)

    # -- pages and login ----------------------------------------------------------------

    async def page(self, request: Request, person: Person) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    async def login_page(
        self, request: Request, error: str = "", status: int = 200, name: str = ""
    ) -> Response:
        if not self.access.needs_login(request):
            return RedirectResponse(PREFIX + "/", 303)
        notes = []
        if self.locked_reason:
            notes.append(self.locked_reason)
        if request.url.scheme != "https" and not _loopback_host(request):
            notes.append(
                "This connection is not encrypted: the browser will not keep the "
                "login cookie (it is Secure). Serve the gateway over HTTPS, e.g. "
                "behind a reverse proxy that terminates TLS."
            )
        body = (STATIC / "login.html").read_text(encoding="utf-8")
        body = (
            body.replace("{{error}}", _paragraph("error", error))
            .replace("{{notes}}", "".join(_paragraph("note", n) for n in notes))
            .replace("{{name}}", html.escape(name, quote=True))
        )
        return HTMLResponse(body, status)

    async def login(self, request: Request) -> Response:
        if not origin_ok(request):
            return await self.login_page(
                request,
                "The login form must be sent from this page (the Origin header did not match).",
                403,
            )
        form = await request.form()
        name = str(form.get("name") or "").strip()
        token = str(form.get("token") or "")
        if not name or len(name) > 64 or not name.isprintable():
            return await self.login_page(
                request,
                "Enter your name (up to 64 characters): it is recorded with every answer you give.",
                400,
            )
        source = request.client.host if request.client else "unknown"
        wait = self.access.throttle.begin(source)
        if wait is not None:  # rule: one guess at a time per source, then back-off
            return await self.login_page(
                request,
                f"Too many wrong tokens from this address: try again in {math.ceil(wait)} s.",
                429,
                name,
            )
        sid = None
        try:
            sid = self.access.login(name, token)
            if sid is None:
                await asyncio.sleep(1.0)  # holds this source's slot: slows down guessing
        finally:
            failures, refused, wait = self.access.throttle.end(source, sid is not None)
        if sid is None:
            await self._run(self._record_failed_login, source, name, failures, refused, wait)
            return await self.login_page(request, "That token is not right.", 401, name)
        response = RedirectResponse(PREFIX + "/", 303)
        response.set_cookie(
            COOKIE,
            sid,
            max_age=int(self.access.ttl),
            path=PREFIX,
            secure=True,
            httponly=True,
            samesite="strict",
        )
        return response

    def _record_failed_login(
        self, source: str, name: str, failures: int, refused: int, wait: float
    ) -> None:
        meanwhile = f"; {refused} attempts refused unchecked meanwhile" if refused else ""
        self.state.audit.record(
            AuditEvent(
                kind="login",
                decision="deny",
                channel=CHANNEL,
                approver=name,
                reason="wrong dashboard token",
                result=f"wrong token #{failures} in a row from {source}{meanwhile}; "
                f"next attempt checked in {wait:g} s",
            )
        )

    async def logout(self, request: Request, person: Person) -> Response:
        self.access.logout(request)
        response = JSONResponse({"ok": True})
        response.delete_cookie(COOKIE, path=PREFIX, secure=True, httponly=True, samesite="strict")
        return response

    # -- the API --------------------------------------------------------------------------

    async def me(self, request: Request, person: Person) -> Response:
        config = self.gateway.config
        return _json(
            {
                "name": person.name,
                "csrf": person.csrf,
                "logged_in": person.logged_in,
                "workspace": str(self.gateway.workspace),
                "approvals": {"mode": config.approvals.mode, "timeout": config.approvals.timeout},
                "webhooks": len(config.webhooks.targets),
                "time": time.time(),
            }
        )

    async def approvals(self, request: Request, person: Person) -> Response:
        def read() -> dict[str, Any]:
            queue = self.state.approvals
            return {
                "pending": [views.ask(a) for a in queue.pending()],
                "recent": [views.settled(a) for a in queue.recent(20) if a.status != "pending"],
            }

        return _json(await self._run(read))

    async def answer(self, request: Request, person: Person) -> Response:
        ask_id = request.path_params["ask_id"]
        try:
            data = await request.json()
            choice = data["choice"]
            reason = str(data.get("reason") or "")[:_MAX_REASON]
            config_file = data.get("config_file")
            if choice not in _CHOICES or not (config_file is None or isinstance(config_file, str)):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return _json(
                {
                    "accepted": False,
                    "message": "send JSON: choice (once, session, "
                    "always, deny), reason, config_file",
                },
                400,
            )
        queue = self.state.approvals
        if await self._run(queue.get, ask_id) is None:
            return _json({"accepted": False, "message": f"no ask {ask_id}"}, 404)
        result = await self._run(
            queue.answer, ask_id, Answer(choice, CHANNEL, person.name, reason, config_file)
        )
        return _json({"accepted": bool(result), "message": result.message}, 200 if result else 409)

    async def sessions(self, request: Request, person: Person) -> Response:
        live = list(self.gateway.sessions.values())
        return _json({"sessions": [views.session(s) for s in live]})

    async def end_session(self, request: Request, person: Person) -> Response:
        session = self.gateway.sessions.get(request.path_params["session_id"])
        if session is None:
            return _json({"ok": False, "message": "no such session"}, 404)

        def end() -> None:
            self.state.audit.record(
                AuditEvent(
                    kind="sandbox",
                    session=session.id,
                    agent=session.agent,
                    approver=person.name,
                    channel=CHANNEL,
                    result=f"session ended from the dashboard by {person.name}",
                )
            )
            self.gateway.close_session(session)

        await self._run(end)
        return _json({"ok": True, "message": f"session {session.id} ended"})

    async def add_scope(self, request: Request, person: Person) -> Response:
        """A person adds a value to a session's task scope (what `agentvisor scope` does)."""
        from ...errors import ConfigError
        from ...state.events import AuditEvent

        session = self.gateway.sessions.get(request.path_params["session_id"])
        store = self.gateway.flow.scopes
        if session is None or store is None:
            return _json({"ok": False, "message": "no such session"}, 404)
        try:
            data = await request.json()
            field, value = str(data["field"]).strip(), str(data["value"]).strip()
        except (KeyError, TypeError, ValueError):
            return _json({"ok": False, "message": "send JSON: field, value"}, 400)
        if not value:
            return _json({"ok": False, "message": "write the value to add"}, 400)

        def add() -> None:
            store.add(session.id, field, [value])
            self.state.audit.record(
                AuditEvent(
                    kind="grant",
                    session=session.id,
                    agent=session.agent,
                    tool="scope",
                    arguments={field: value},
                    approver=person.name,
                    channel=CHANNEL,
                    result=f"task scope widened from the dashboard by {person.name}",
                )
            )

        try:
            await self._run(add)
        except ConfigError as exc:
            return _json({"ok": False, "message": str(exc)}, 400)
        return _json({"ok": True, "message": f"{field}={value} added to {session.id}'s scope"})

    # -- changesets (agentvisor.changes) ---------------------------------------------------

    async def changes(self, request: Request, person: Person) -> Response:
        changesets = self.gateway.changesets
        if changesets is None:
            return _json({"enabled": False, "sessions": [], "applied": []})

        def collect() -> dict[str, Any]:
            sessions = []
            for session in changesets.sessions():
                items = changesets.pending(session)
                if items:
                    sessions.append(
                        {
                            "id": session.id,
                            "live": session.id in self.gateway.sessions,
                            "pending": [
                                {**p.as_json(), "diff": changesets.diff(session, p)} for p in items
                            ],
                        }
                    )
            applied = [a.as_json() for a in changesets.applied()[-10:]]
            return {"enabled": True, "sessions": sessions, "applied": applied[::-1]}

        return _json(await self._run(collect))

    async def apply_changes(self, request: Request, person: Person) -> Response:
        return await self._settle_by_person(request, person, "apply")

    async def discard_changes(self, request: Request, person: Person) -> Response:
        return await self._settle_by_person(request, person, "discard")

    async def _settle_by_person(self, request: Request, person: Person, what: str) -> Response:
        """A person applies or discards pending paths of one session (never all at once)."""
        from ...changes import audit_entry
        from ...state.events import AuditEvent

        changesets = self.gateway.changesets
        body = await _body(request)
        session_id, paths = body.get("session"), body.get("paths")
        if changesets is None:
            return _json({"ok": False, "message": "changesets are off (workspace.mode)"}, 409)
        if not isinstance(session_id, str) or not isinstance(paths, list) or not paths:
            return _json({"ok": False, "message": "give a session and a list of paths"}, 400)
        if not all(isinstance(p, str) for p in paths):
            return _json({"ok": False, "message": "paths must be strings"}, 400)

        def act() -> dict[str, Any]:
            session = changesets.session(session_id)
            if what == "discard":
                dropped = changesets.discard(session, paths)
                listed = [{"path": p.path, "kind": p.kind} for p in dropped]
                message = f"discarded {len(dropped)} change(s)"
                ref = None
            else:
                settlement = changesets.apply(session, paths)
                done = settlement.applied.entries if settlement.applied else []
                listed = [audit_entry(e) for e in done if not e.error]
                held = [p.path for p in settlement.held]
                message = f"applied {len(listed)} path(s)" + (
                    f"; still held (conflict): {', '.join(held)}" if held else ""
                )
                ref = settlement.applied.id if settlement.applied else None
            self.state.audit.record(
                AuditEvent(
                    kind="changes",
                    session=session_id,
                    decision=what,
                    approver=person.name,
                    channel=CHANNEL,
                    arguments={"paths": listed},
                    ref=ref,
                    result=message,
                )
            )
            return {"ok": True, "message": message}

        try:
            return _json(await self._run(act))
        except AgentvisorError as exc:
            return _json({"ok": False, "message": str(exc)}, 409)

    async def grants(self, request: Request, person: Person) -> Response:
        items = await self._run(self.state.grants.all)
        return _json({"grants": [views.grant(g) for g in reversed(items)]})

    async def add_grant(self, request: Request, person: Person) -> Response:
        from ...errors import ConfigError
        from ...state.grants import parse_duration

        try:
            data = await request.json()
            if isinstance(data, dict) and "ask" in data:
                return await self._grant_refusal(data, person)
            kind, pattern = str(data["kind"]), str(data["pattern"]).strip()
            duration = parse_duration(str(data.get("duration") or "1h"))
            session = str(data.get("session") or "").strip() or None
            reason = str(data.get("reason") or "").strip()[:_MAX_REASON] or None
            if not pattern:
                raise ValueError("write the pattern to allow")
            grant = await self._run(
                lambda: self.state.grants.add(
                    kind, pattern, session, duration, reason, created_by=f"{CHANNEL}:{person.name}"
                )
            )
        except (KeyError, TypeError):
            return _json(
                {"ok": False, "message": "send JSON: kind, pattern, duration, session, reason"}, 400
            )
        except (ValueError, ConfigError) as exc:
            return _json({"ok": False, "message": str(exc)}, 400)
        return _json({"ok": True, "grant": views.grant(grant)})

    async def refusal(self, request: Request, person: Person) -> Response:
        """What a refusal's id stands for (`agentvisor grant --ask ID` on the web): the
        page shows it, and a grant by id must confirm exactly these patterns."""
        from ...errors import NotGrantable

        refusal_id = request.path_params["refusal_id"]
        try:
            refused = await self._run(lambda: self.state.refusals.grantable(refusal_id))
        except NotGrantable as exc:
            return _json({"ok": False, "message": str(exc)}, 404)
        return _json({"ok": True, "refusal": views.refusal(refused)})

    async def _grant_refusal(self, data: dict[str, Any], person: Person) -> Response:
        """A grant by a refusal's id. The id came from an agent; the person confirms the
        patterns they were shown, and a grant is made only when those are exactly what the
        id stands for."""
        from ...errors import ConfigError, NotGrantable
        from ...state.grants import parse_duration

        refusals = self.state.refusals
        try:
            duration = parse_duration(str(data.get("duration") or "1h"))
            reason = str(data.get("reason") or "").strip()[:_MAX_REASON] or None
            confirmed = data.get("patterns")
            refused = await self._run(lambda: refusals.grantable(str(data["ask"])))
            if confirmed != list(refused.patterns):
                raise NotGrantable(
                    f"the patterns confirmed are not what {refused.id} stands for: "
                    f"GET /dashboard/api/refusals/{refused.id} and confirm its patterns"
                )
            made = await self._run(
                lambda: refusals.grant(
                    refused, self.state.grants, duration, reason, f"{CHANNEL}:{person.name}"
                )
            )
        except (ValueError, ConfigError, NotGrantable) as exc:
            return _json({"ok": False, "message": str(exc)}, 400)
        return _json({"ok": True, "grants": [views.grant(g) for g in made]})

    async def revoke_grant(self, request: Request, person: Person) -> Response:
        grant_id = request.path_params["grant_id"]
        done = await self._run(
            lambda: self.state.grants.revoke(grant_id, by=f"{CHANNEL}:{person.name}")
        )
        return _json(
            {"ok": bool(done), "message": "revoked" if done else "no such grant"},
            200 if done else 404,
        )

    async def policy(self, request: Request, person: Person) -> Response:
        data = views.policy(self.gateway)
        data["grants"] = [views.grant(g) for g in await self._run(self.state.grants.active)]
        return _json(data)

    async def audit(self, request: Request, person: Person) -> Response:
        q = request.query_params
        try:
            since = _since(q.get("since", ""))
            limit = min(max(int(q.get("limit") or 200), 1), 1000)
        except ValueError as exc:
            return _json({"error": str(exc)}, 400)
        text = q.get("q", "").strip().lower()

        def search() -> list[dict[str, Any]]:
            rows = self.state.audit.events(
                session=q.get("session") or None,
                since=since,
                decision=q.get("decision") or None,
                kind=q.get("kind") or None,
                limit=5000 if text else limit,
            )
            found = [views.event(e) for e in rows]
            if text:
                found = [e for e in found if text in json.dumps(e, default=str).lower()]
            return found[-limit:][::-1]

        return _json({"events": await self._run(search)})

    async def events(self, request: Request, person: Person) -> Response:
        return StreamingResponse(
            self.feed.stream(),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    # -- the webhook callback -------------------------------------------------------------

    async def webhook(self, request: Request) -> Response:
        from ...approvals.webhook import MAX_BODY

        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return _json({"accepted": False, "error": "body too large"}, 413)
        peer = request.client.host if request.client else "?"
        reply = await self._run(self.receiver.handle, request.headers, body, peer)
        return _json(reply.body, reply.status)


class _SecurityHeaders:
    """No framing (clickjacking on the approve button), no sniffing, a strict CSP."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"content-security-policy", _CSP.encode()),
                    (b"x-frame-options", b"DENY"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


def _json(data: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(data, default=str),
        status,
        media_type="application/json",
        headers={"cache-control": "no-store"},
    )


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object, or an empty one (the handler then says what is missing)."""
    try:
        data = await request.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _paragraph(cls: str, text: str) -> str:
    return f'<p class="{cls}">{html.escape(text)}</p>' if text else ""


def _loopback_host(request: Request) -> bool:
    from urllib.parse import urlsplit

    from ...net.loopback import is_loopback

    return is_loopback(urlsplit("//" + request.headers.get("host", "")).hostname or "")


def _since(text: str) -> float | None:
    """``30m`` / ``2h`` (that long ago) or an ISO date/time."""
    import datetime

    from ...state.grants import parse_duration

    text = text.strip()
    if not text:
        return None
    try:
        return time.time() - parse_duration(text)
    except ValueError:
        pass
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(
            f"since: {text!r} is neither a duration (30m, 2h, 1d) nor an ISO date"
        ) from None
