"""Checks on the network: uploads and data sent to another host, remote shells, copies
to remote hosts, /dev/tcp, scanners and private or metadata addresses."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .. import hosts, knowledge
from ..facts import Field, Invocation
from .findings import Finding, from_, is_remote, operands
from .scope import Scope

_DATA_OPTS = frozenset(
    {
        "-d",
        "--data",
        "--data-binary",
        "--data-raw",
        "--data-urlencode",
        "--data-ascii",
        "-F",
        "--form",
        "--form-string",
        "--json",
        "-T",
        "--upload-file",
        "--post-file",
        "--body-file",
    }
)
_UPLOAD_OPTS = frozenset({"-T", "--upload-file", "--post-file", "--body-file"})
_HTTPIE = frozenset({"http", "https", "xh", "xhs", "httpie"})


def http_upload(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    args = inv.argv[1:]
    for index, a in enumerate(args):
        key, eq, value = a.text.partition("=")
        if key in _DATA_OPTS and not eq and index + 1 < len(args):
            v = args[index + 1]
        elif key in _DATA_OPTS and eq:
            v = Field(((value, a.dynamic),), taint=a.taint)
        elif key.startswith("-d") and len(key) > 2 and not key.startswith("--"):
            v = Field(((a.text[2:], a.dynamic),), taint=a.taint)
        else:
            continue
        yield from _sent(inv, piece, key, v)
    if inv.program in _HTTPIE:
        for a in args:
            if re.match(r"^[^=:@]*(=@|@|:=@)", a.text) and not a.text.startswith("-"):
                yield Finding("exfiltration", "ask", f"`{piece}` uploads {a.text}", piece)


def _sent(inv: Invocation, piece: str, key: str, v: Field) -> Iterator[Finding]:
    text = v.text
    upload = key in _UPLOAD_OPTS
    if upload or text.startswith("@") or "=@" in text or "=<" in text:
        name = text if upload else re.split(r"@|=<", text, maxsplit=1)[-1]
        if name in ("-", "."):
            reason = f"`{piece}` sends its input{from_(inv.stdin)} to the network"
            yield Finding("exfiltration", "ask", reason, piece)
        else:
            yield Finding("exfiltration", "ask", f"`{piece}` uploads the file {name}", piece)
    elif "cmdsub" in v.taint:
        reason = f"`{piece}` sends the output of a command to the network"
        yield Finding("exfiltration", "ask", reason, piece)


def sender(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    texts = [a.text for a in inv.argv[1:]]
    if inv.program in ("nc", "ncat", "netcat") and any(
        t in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec") for t in texts
    ):
        reason = f"`{piece}` connects a program to the network (a remote shell)"
        yield Finding("exfiltration", "ask", reason, piece)
    if inv.program == "socat" and any(
        re.match(r"^(EXEC|SYSTEM|FILE|OPEN|GOPEN):", t, re.I) for t in texts
    ):
        reason = f"`{piece}` connects files or programs to the network"
        yield Finding("exfiltration", "ask", reason, piece)
    if inv.stdin.kind in ("file", "unknown", "literal") and not (
        inv.program == "ssh" and inv.stdin.kind == "literal"
    ):
        reason = f"`{piece}` sends its input{from_(inv.stdin)} to the network"
        yield Finding("exfiltration", "ask", reason, piece)


def remote_copy(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    ops = operands(inv.argv[1:])
    if inv.program == "rclone":
        ops = ops[1:]
    if len(ops) >= 2 and is_remote(ops[-1].text):
        reason = f"`{piece}` copies files to another host ({ops[-1].text})"
        yield Finding("exfiltration", "ask", reason, piece)
    if inv.program == "sftp" and inv.stdin.kind != "none":
        yield Finding("exfiltration", "ask", f"`{piece}` runs sftp commands from its input", piece)


def dev_tcp(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    for r in inv.redirects:
        if r.target is not None and r.target.text.startswith(("/dev/tcp/", "/dev/udp/")):
            host = r.target.text.split("/")[3] if r.target.text.count("/") >= 3 else ""
            yield from scope.fetch_host(host, piece)
            if r.writes:
                reason = f"`{piece}` sends data to {host} over /dev/tcp"
                yield Finding("exfiltration", "ask", reason, piece)


def destinations(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    if inv.program in knowledge.SCANNERS:
        reason = f"`{piece}` scans the network ({inv.program})"
        yield Finding("private_network", "ask", reason, piece, tag="scan")
    seen: set[str] = set()
    for a in inv.argv[1:]:
        if a.lead_dynamic or (a.text.startswith("-") and "=" not in a.text):
            continue
        for host in hosts.hosts_in(a.probe("0")):
            if host not in seen:
                seen.add(host)
                yield from scope.fetch_host(host, piece)
