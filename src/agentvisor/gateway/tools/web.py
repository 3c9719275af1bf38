"""web_extract, web_search and http_request: on the host, through the network layer.

These tools decide their own destinations: the network layer asks the policy engine
about each host actually reached (after redirects, with the guard's address checks and
the exact-host rule for internal destinations), with the gateway's approval broker and
audit log plugged in. So they contribute no action up front.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import AgentvisorError
from ..results import ToolOutput
from . import ToolSpec, schema

if TYPE_CHECKING:
    from ..session import Session


def _no_actions(session: Session, args: dict[str, Any]) -> list:
    return []


def _run(call: Callable[[], dict[str, Any]]) -> ToolOutput:
    try:
        result = call()
    except AgentvisorError as exc:
        return ToolOutput(str(exc), is_error=True, data={"refused": True})
    return ToolOutput(json.dumps(result, ensure_ascii=False, indent=1), data=result)


def web_extract(session: Session, args: dict[str, Any]) -> ToolOutput:
    return _run(lambda: session.web().web_extract(args["url"]))


def web_search(session: Session, args: dict[str, Any]) -> ToolOutput:
    return _run(lambda: session.web().web_search(args["query"], args.get("max_results")))


def http_request(session: Session, args: dict[str, Any]) -> ToolOutput:
    return _run(
        lambda: session.web().http_request(
            args["method"], args["url"], headers=args.get("headers"), body=args.get("body")
        )
    )


TOOLS = [
    ToolSpec(
        name="web_extract",
        description="Fetch a web page (GET) from the host, outside the sandbox, and return "
        "its readable text as Markdown with the final URL, status and content type. Internal "
        "and private addresses are refused unless a person allowed that exact host.",
        input_schema=schema(
            {"url": {"type": "string", "description": "http or https URL."}}, ["url"]
        ),
        toolsets=frozenset({"web"}),
        actions=_no_actions,
        run=web_extract,
    ),
    ToolSpec(
        name="web_search",
        description="Search the web through the configured provider; returns titles, URLs "
        "and snippets.",
        input_schema=schema(
            {
                "query": {"type": "string"},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            ["query"],
        ),
        toolsets=frozenset({"web"}),
        actions=_no_actions,
        run=web_search,
    ),
    ToolSpec(
        name="http_request",
        description="Send an HTTP request to an API from the host. Credentials are never "
        "given to you: write {{secret:NAME}} in a header, the URL or the body and agentvisor "
        "fills it in only toward the hosts that secret may reach. Hosts need an allow rule "
        "(otherwise a person is asked).",
        input_schema=schema(
            {
                "method": {
                    "type": "string",
                    "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                },
                "url": {"type": "string"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"type": "string"},
            },
            ["method", "url"],
        ),
        toolsets=frozenset({"http"}),
        actions=_no_actions,
        run=http_request,
    ),
]
