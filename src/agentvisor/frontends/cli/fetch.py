"""``agentvisor fetch URL``: the host-side fetch from a terminal.

The same path the agent's web tools take: destination guard, policy (``fetch`` actions
with tool ``fetch``, so it agrees with ``agentvisor check fetch URL``), approvals,
secret placeholders, redirects re-checked, size and time caps. Exit status: 0 for an
HTTP response below 400, 1 for 400 and above, 125 when agentvisor refuses or fails.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fetch",
        help="fetch a URL on the host through the destination guard and the policy",
        description="Fetch URL on the host through agentvisor's destination guard and policy "
        "(the same path as the agent's web tools) and print the body. Secrets may be written "
        "as {{secret:NAME}} in the URL, headers or body; they are sent only to the secret's "
        "hosts and redacted from the output.",
    )
    p.add_argument("url", metavar="URL", help="an http:// or https:// URL")
    p.add_argument("-X", "--method", default="GET", help="HTTP method (default: GET)")
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="add a request header (repeatable)",
    )
    p.add_argument("-d", "--data", metavar="TEXT", help="request body")
    p.add_argument(
        "--extract",
        action="store_true",
        help="print readable text (Markdown for HTML pages), as the web_extract tool returns it",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the whole result (final URL, status, headers, body) as JSON",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="config file, used alone (default: user config, project agentvisor.yaml over it)",
    )
    p.add_argument(
        "--session",
        metavar="ID",
        help="session the request belongs to (rules and grants can be bound to one)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...errors import ConfigError
    from ...net.client import Fetcher
    from ...net.tools import UnsupportedContent, extract_html, is_text, looks_binary

    headers = []
    for line in args.header:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {line!r}: expected 'NAME: VALUE'")
        headers.append((name.strip(), value.strip()))
    config = load_config(args.config)
    with Fetcher.from_config(config) as fetcher:
        result = fetcher.request(
            args.method,
            args.url,
            headers=headers,
            body=args.data,
            tool="fetch",
            session=args.session,
        )
        redact = fetcher.secrets.redactor()
    textual = (is_text(result.mime) or not result.mime) and not looks_binary(result.content)
    if args.extract:
        if result.mime in ("text/html", "application/xhtml+xml"):
            body = extract_html(result.text(), result.url)[1]
        elif textual:
            body = result.text()
        else:
            raise UnsupportedContent(
                f"{result.url} returned {result.mime or 'binary data'}; --extract prints text only"
            )
        sys.stdout.write(redact.text(body).rstrip("\n") + "\n")
    elif args.json:
        out = {
            "url": result.url,
            "status": result.status,
            "headers": result.headers,
            "content_type": result.content_type,
            "truncated": result.truncated,
            "redirects": list(result.redirects),
        }
        if textual:
            out["body"] = result.text()
        else:
            import base64

            out["body_base64"] = base64.b64encode(result.content).decode("ascii")
        print(json.dumps(redact.any(out), indent=2))
    else:
        sys.stdout.buffer.write(result.content)
        sys.stdout.flush()
    if result.truncated:
        print("agentvisor: the response was cut at network.max_response_bytes", file=sys.stderr)
    if result.status >= 400:
        print(f"agentvisor: HTTP {result.status} from {result.url}", file=sys.stderr)
        return 1
    return 0
