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
        help="print readable text (Markdown for HTML pages), as the web_extract tool returns "
        "it: text a browser would not show is left out, and stderr says how much",
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
    from ...net.tools import extract, response_dict

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
    notes: tuple[str, ...] = (result.charset_note,) if result.charset_note else ()
    if args.extract:
        page = extract(result)
        notes = page.notes
        sys.stdout.write(redact.text(page.text).rstrip("\n") + "\n")
    elif args.json:
        print(json.dumps(redact.any(response_dict(result)), indent=2))
    else:
        sys.stdout.buffer.write(result.content)
        sys.stdout.flush()
    for note in notes:
        print(f"agentvisor: {note}", file=sys.stderr)
    if result.truncated:
        print("agentvisor: the response was cut at network.max_response_bytes", file=sys.stderr)
    if result.status >= 400:
        print(f"agentvisor: HTTP {result.status} from {result.url}", file=sys.stderr)
        return 1
    return 0
