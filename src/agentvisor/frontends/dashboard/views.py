"""JSON views of what the dashboard shows: asks, audit events, sessions, grants, policy.

Strings an agent wrote (commands, paths, arguments) are data here; the page puts them in
the document as text, never as markup.
"""

from __future__ import annotations

import time
from typing import Any

_LONG = 400  # characters of one argument value shown in the feed and the audit list


def ask(pending: Any) -> dict[str, Any]:
    from ...approvals.webhook import rule_previews
    from ...policy.categories import CATEGORIES

    data = pending.as_dict()
    data["rule_previews"] = rule_previews(data)
    data["category_info"] = [
        {
            "name": name,
            "summary": CATEGORIES[name].summary if name in CATEGORIES else "",
            "hardline": bool(name in CATEGORIES and CATEGORIES[name].hardline),
        }
        for name in data.get("categories") or ()
    ]
    return data


def settled(pending: Any) -> dict[str, Any]:
    data = pending.as_dict()
    return {
        "id": data["id"],
        "status": data["status"],
        "outcome": data.get("outcome"),
        "answer": data.get("answer"),
        "action": data.get("action"),
    }


def event(item: Any) -> dict[str, Any]:
    data = item.as_dict()
    if isinstance(data.get("arguments"), dict):
        data["arguments"] = {k: _short(v) for k, v in data["arguments"].items()}
    return data


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _LONG:
        return value[:_LONG] + f"… ({len(value) - _LONG} more characters)"
    return value


def session(s: Any) -> dict[str, Any]:
    jobs = [
        {"id": j.id, "command": " ".join(j.argv)[:_LONG], "running": j.running, "status": j.status}
        for j in s.jobs()
    ]
    return {
        "id": s.id,
        "agent": s.agent,
        "toolsets": list(s.toolsets),
        "tools": sorted(s.tools),
        "created": s.created,
        "idle": round(time.monotonic() - s.last_used, 1),
        "closed": s.closed,
        # What a person declared for the session (`agentvisor scope`, or this dashboard).
        "scope": s.gateway.flow.scopes.get(s.id) if s.gateway.flow.scopes else {},
        "sandbox": {
            "backend": s.gateway.config.sandbox.backend,
            "network": s.gateway.config.sandbox.network,
            "persistent": bool(s.persistent),
            "running": s.sandbox_running,
            "jobs": jobs,
        },
    }


def policy(gateway: Any) -> dict[str, Any]:
    from ...policy.categories import CATEGORIES

    config = gateway.config
    source = config.source or "<defaults>"
    rules = []
    for index, r in enumerate(config.rules):
        when = {k: v for k, v in r.when.model_dump().items() if v} if r.when else {}
        rules.append(
            {
                "name": r.id or f"{source} rules[{index}]",
                "decision": r.decision,
                "kind": r.kind,
                "pattern": r.pattern,
                "when": when,
                "methods": r.methods,
                "expires": str(r.expires) if r.expires else None,
                "reason": r.reason,
            }
        )
    enabled = gateway.policy.categories
    return {
        "source": config.source,
        "workspace": str(gateway.workspace),
        "approvals": {
            "mode": config.approvals.mode,
            "timeout": config.approvals.timeout,
            "judge": config.approvals.judge,
        },
        "sandbox": {"backend": config.sandbox.backend, "network": config.sandbox.network},
        "defaults": dict(gateway.policy.defaults),
        "rules": rules,
        "categories": [
            {
                "name": c.name,
                "hardline": c.hardline,
                "summary": c.summary,
                "enabled": c.name in enabled,
                "verdict": c.verdict,
            }
            for c in CATEGORIES.values()
        ],
    }


def grant(g: Any) -> dict[str, Any]:
    return g.as_dict()


def refusal(r: Any) -> dict[str, Any]:
    """A refused request a person can grant by id, as recorded (the page escapes it)."""
    fields = ("id", "created_at", "expires_at", "session", "agent", "tool", "kind", "target")
    return {
        **{name: getattr(r, name) for name in fields},
        "reason": r.reason,
        "rule": r.rule,
        "patterns": list(r.patterns),
    }
