"""Who is at the dashboard, and whether a request may act.

    no login   the gateway listens on loopback, the browser is on this machine (client
               address loopback, no proxy headers) and ``dashboard.login`` is ``auto``.
               The Host header must then name a loopback address (no DNS rebinding).
    login      everywhere else: ``dashboard.token`` is exchanged on the login page for a
               random session id in a Secure, HttpOnly, SameSite=Strict cookie.

Every POST needs the session's CSRF token in ``X-CSRF-Token`` and an Origin header naming
this very host; the login form needs the Origin. Token guesses are slowed per source
address (`LoginThrottle`) and every wrong token is an audit event (kind ``login``).
"""

from __future__ import annotations

import getpass
import hmac
import secrets
import threading
import time
from urllib.parse import urlsplit

from starlette.requests import Request

from ...net.loopback import is_loopback
from ...records import Declared

COOKIE = "agentvisor_dashboard"
_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


class Person(Declared):
    name: str
    csrf: str
    logged_in: bool
    expires: float | None = None


class Access:
    def __init__(
        self, *, bind_host: str, login: str, token: str | None, login_hours: float
    ) -> None:
        self.bind_loopback = is_loopback(bind_host)
        self.always = login == "always"
        self.token = token
        self.ttl = login_hours * 3600
        self._local = Person(_local_user(), secrets.token_urlsafe(32), logged_in=False)
        self._logins: dict[str, Person] = {}
        self._lock = threading.Lock()
        self.throttle = LoginThrottle()

    def needs_login(self, request: Request) -> bool:
        if self.always or not self.bind_loopback:
            return True
        client = request.client
        if client is None or not is_loopback(client.host):
            return True
        return any(h in request.headers for h in _PROXY_HEADERS)

    def host_ok(self, request: Request) -> bool:
        """Without a login only loopback names are accepted in the Host header."""
        if self.needs_login(request):
            return True
        host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        return is_loopback(host)

    def person(self, request: Request) -> Person | None:
        if not self.needs_login(request):
            return self._local
        sid = request.cookies.get(COOKIE, "")
        with self._lock:
            person = self._logins.get(sid)
            if person is not None and person.expires is not None and person.expires < time.time():
                del self._logins[sid]
                return None
            return person

    def login(self, name: str, token: str) -> str | None:
        """A new session id for a correct token, else None."""
        if not self.token or not hmac.compare_digest(token.encode(), self.token.encode()):
            return None
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._logins[sid] = Person(
                name, secrets.token_urlsafe(32), logged_in=True, expires=time.time() + self.ttl
            )
        return sid

    def logout(self, request: Request) -> None:
        with self._lock:
            self._logins.pop(request.cookies.get(COOKIE, ""), None)

    def csrf_ok(self, request: Request, person: Person) -> bool:
        given = request.headers.get("x-csrf-token", "")
        return origin_ok(request) and hmac.compare_digest(given.encode(), person.csrf.encode())


class _Source(Declared, frozen=False):
    failures: int = 0  # wrong tokens in a row
    busy: bool = False  # an attempt is being checked now
    until: float = 0.0  # no attempt is checked before this time
    refused: int = 0  # attempts refused since the last wrong token


class LoginThrottle:
    """Token guessing, slowed per source address: one login attempt is checked at a time
    (a wrong token holds the slot for a second), attempts meanwhile are refused at once
    without being checked, and from the third wrong token in a row the source waits 2, 4,
    8 ... s (at most `MAX_WAIT`) before the next is checked. A right token resets it.

    Behind a reverse proxy every browser has the proxy's address, so one guesser slows
    everyone there: the price of never letting guesses through in parallel."""

    FREE = 2  # wrong tokens in a row before waiting starts (typos)
    MAX_WAIT = 300.0
    _KEEP = 10_000  # sources remembered; settled ones are forgotten first

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[str, _Source] = {}

    def begin(self, source: str) -> float | None:
        """None: check this attempt (then call `end`); else the seconds left to wait."""
        now = time.monotonic()
        with self._lock:
            state = self._sources.setdefault(source, _Source())
            if state.busy or now < state.until:
                state.refused += 1
                return max(state.until - now, 1.0)
            state.busy = True
            return None

    def end(self, source: str, ok: bool) -> tuple[int, int, float]:
        """After a checked attempt: (wrong tokens in a row, attempts refused meanwhile,
        seconds until the next attempt is checked)."""
        with self._lock:
            state = self._sources.setdefault(source, _Source())
            state.busy = False
            if ok:
                self._sources.pop(source, None)
                return 0, 0, 0.0
            state.failures += 1
            refused, state.refused = state.refused, 0
            excess = state.failures - self.FREE
            wait = min(2.0**excess, self.MAX_WAIT) if excess > 0 else 0.0
            state.until = time.monotonic() + wait
            if len(self._sources) > self._KEEP:
                self._forget()
            return state.failures, refused, wait

    def _forget(self) -> None:
        now = time.monotonic()
        for source in [s for s, st in self._sources.items() if not st.busy and st.until < now]:
            del self._sources[source]


def origin_ok(request: Request) -> bool:
    """The Origin header names this host (browsers send it on every POST)."""
    origin = request.headers.get("origin")
    if not origin:
        return False
    return urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower()


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "local user"
