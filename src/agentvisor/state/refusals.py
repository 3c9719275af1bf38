"""Refused requests a person can grant by id: ``agentvisor grant --ask ID``.

When a call is refused and a grant could allow it (the decision has patterns), the
gateway records here what was refused, under the id the agent's refusal names. The words
of some requests cannot be typed back without awkward quoting (nested quotes, newlines,
control characters, thousands of characters); the id stands for them instead.

An agent hands the id to a person, so the id must never let it make the person grant
something other than what they read: the row holds the refused request as the policy saw
it, the grant command shows it (every control character made visible) before asking, an
id is granted once, expires after `LIFETIME`, and only the user whose gateway refused it
may grant it.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import NotGrantable
from ..records import Declared
from .db import Database, instance_id
from .redaction import unchanged
from .schema import refusals

if TYPE_CHECKING:
    from .grants import Grant, GrantStore
    from .redaction import Redact

LIFETIME = 24 * 3600.0  # seconds an id can be granted after its refusal
_CLAIMING = "claiming"  # grant_id while the grants of a claimed id are being written


class Refusal(Declared):
    """A refused request as the policy saw it, and the patterns a grant would add."""

    id: str
    created_at: float
    expires_at: float
    user: str
    gateway: str
    session: str | None
    agent: str | None
    tool: str | None
    kind: str
    target: str
    patterns: tuple[str, ...]
    reason: str
    rule: str | None
    grant_id: str | None = None


class RefusalStore:
    """The grantable refusals on a state database. ``redact``: the gateway's redaction
    function; a refusal whose target or patterns hold a secret is not recorded (the grant
    would store the secret)."""

    def __init__(self, db: Database, redact: Redact | None = None) -> None:
        self.db = db
        self.redact = redact or unchanged

    def record(
        self,
        kind: str,
        target: str,
        patterns: tuple[str, ...],
        reason: str,
        rule: str | None,
        session: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
    ) -> Refusal | None:
        """Store a refusal a grant could lift; None when it holds a secret."""
        if not patterns or any(self.redact(text) != text for text in (target, *patterns)):
            return None
        now = time.time()
        refusal = Refusal(
            f"c-{secrets.token_hex(6)}",
            now,
            now + LIFETIME,
            current_user(),
            instance_id(),
            session,
            agent,
            tool,
            kind,
            target,
            patterns,
            self.redact(reason),
            rule,
        )
        row = {name: getattr(refusal, name) for name in refusal.__match_args__}
        row["patterns"] = json.dumps(list(patterns))
        with self.db.begin() as conn:
            conn.execute(sa.insert(refusals).values(**row))
            # A day past its expiry an id only needs to be unknown: rows do not pile up.
            conn.execute(sa.delete(refusals).where(refusals.c.expires_at < now - LIFETIME))
        return refusal

    def get(self, refusal_id: str) -> Refusal | None:
        with self.db.read() as conn:
            row = (
                conn.execute(sa.select(refusals).where(refusals.c.id == refusal_id))
                .mappings()
                .first()
            )
        return None if row is None else _refusal(row)

    def grantable(self, refusal_id: str, user: str | None = None) -> Refusal:
        """The refusal ``user`` (default: this process's) may grant now, or NotGrantable
        saying why not."""
        found = self.get(refusal_id)
        if found is None:
            raise NotGrantable(
                f"no refused request has the id {refusal_id!r} in this state database "
                "(check the id, and that --config names the gateway's state.url)"
            )
        user = user or current_user()
        if found.user != user:
            raise NotGrantable(
                f"{refusal_id} was refused by a gateway of user {found.user!r}; only that "
                f"user can grant it (you are {user!r})"
            )
        if found.grant_id is not None:
            raise NotGrantable(f"{refusal_id} was already granted ({found.grant_id})")
        if found.expires_at <= time.time():
            raise NotGrantable(
                f"{refusal_id} expired at {_when(found.expires_at)} (an id can be granted "
                f"for {LIFETIME / 3600:g} h after its refusal); let the agent try again"
            )
        return found

    def grant(
        self,
        refused: Refusal,
        grants: GrantStore,
        duration: float,
        reason: str | None = None,
        created_by: str = "operator",
    ) -> list[Grant]:
        """Grant what ``refused`` recorded, for its session, once: the id is claimed first,
        so of two people granting it at once one is told it was granted meanwhile."""
        if not self._claim(refused.id):
            raise NotGrantable(f"{refused.id} was granted meanwhile (agentvisor grants)")
        made: list[Grant] = []
        try:
            for pattern in refused.patterns:
                made.append(
                    grants.add(
                        refused.kind,
                        pattern,
                        refused.session,
                        duration,
                        reason or f"granted by id {refused.id}",
                        created_by,
                    )
                )
        finally:
            self._granted(refused.id, [g.id for g in made])
        return made

    def _claim(self, refusal_id: str) -> bool:
        """Take the id for one grant: only the first claim anywhere succeeds."""
        with self.db.begin() as conn:
            won = conn.execute(
                sa.update(refusals)
                .where(
                    refusals.c.id == refusal_id,
                    refusals.c.grant_id.is_(None),
                    refusals.c.expires_at > time.time(),
                )
                .values(grant_id=_CLAIMING)
            ).rowcount
        return bool(won == 1)

    def _granted(self, refusal_id: str, grant_ids: list[str]) -> None:
        """Name the grants a claimed id became; none releases the claim."""
        value = ",".join(grant_ids) or None
        with self.db.begin() as conn:
            conn.execute(
                sa.update(refusals)
                .where(refusals.c.id == refusal_id, refusals.c.grant_id == _CLAIMING)
                .values(grant_id=value)
            )


def current_user() -> str:
    """The name of the user this process runs as (the uid when it has no name)."""
    import pwd

    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _refusal(row: Any) -> Refusal:
    fields = dict(row)
    fields["patterns"] = tuple(json.loads(fields["patterns"]))
    return Refusal(**fields)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
