"""Checks on the network: uploads and data sent to another host, remote shells, copies
to remote hosts, /dev/tcp, scanners and private or metadata addresses."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .. import hosts, knowledge
from ..facts import Field, Invocation
from ..lazyre import regex
from .findings import Finding, from_, is_remote, operands
from .scope import Scope

# Per program: options whose value is sent (data), and those of them naming a file.
_CURL_DATA = frozenset(
    {
        *("-d", "--data", "--data-binary", "--data-raw", "--data-urlencode", "--data-ascii"),
        *("-F", "--form", "--form-string", "--json", "-T", "--upload-file"),
    }
)
_SENDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "curl": (_CURL_DATA, frozenset({"-T", "--upload-file"})),
    "wget": (
        frozenset({"--post-data", "--body-data", "--post-file", "--body-file"}),
        frozenset({"--post-file", "--body-file"}),
    ),
}
_HTTPIE = frozenset({"http", "https", "xh", "xhs", "httpie"})


def http_upload(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    args = inv.argv[1:]
    data, files = _SENDS.get(inv.program or "", (frozenset(), frozenset()))
    for index, a in enumerate(args):
        key, eq, value = a.text.partition("=")
        if key in data and not eq and index + 1 < len(args):
            v = args[index + 1]
        elif key in data and eq:
            v = Field(((value, a.dynamic),), taint=a.taint)
        elif inv.program == "curl" and key.startswith("-d") and len(key) > 2 and key[1] != "-":
            v = Field(((a.text[2:], a.dynamic),), taint=a.taint)
        else:
            continue
        yield from _sent(inv, piece, key in files, v)
    if inv.program in _HTTPIE:
        for a in args:
            if re.match(r"^[^=:@]*(=@|@|:=@)", a.text) and not a.text.startswith("-"):
                yield Finding("exfiltration", "ask", f"`{piece}` uploads {a.text}", piece)


def _sent(inv: Invocation, piece: str, upload: bool, v: Field) -> Iterator[Finding]:
    text = v.text
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
    elif v.dynamic and (secret := regex(knowledge.SECRET_VAR).search(text)):
        reason = f"`{piece}` sends {secret.group(0)} (a secret, by its name) as data"
        yield Finding("exfiltration", "ask", reason, piece)


def inline_exfil(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    """Inline interpreter code that reads the environment or files and uses the network."""
    code = inv.runs_code
    if inv.code_lang in (None, "shell") or code is None or code.kind != "literal":
        return
    # The whole command line: modules loaded by option count (perl -MLWP::Simple).
    sends = regex(knowledge.CODE_SENDS).search(f"{code.text}\n{inv.text}")
    reads = regex(knowledge.CODE_READS).search(code.text)
    if sends and reads:
        reason = (
            f"inline {inv.code_lang} code reads {reads.group(0).strip('(')} and sends over the "
            f"network ({sends.group(0).strip('(')})"
        )
        yield Finding("exfiltration", "ask", reason, piece)


def secrets_in_urls(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    """A secret's variable, or the output of a command that reads secrets, in a request."""
    args = inv.argv[1:]
    for index, a in enumerate(args):
        after_option = index > 0 and args[index - 1].text.startswith("-")
        if a.text.startswith("-") or not a.dynamic or (after_option and "://" not in a.text):
            continue  # a header or an option's value (-H "Authorization: $TOKEN") is not a URL
        secret = regex(knowledge.SECRET_VAR).search(a.text)
        if secret:
            reason = f"`{piece}` puts {secret.group(0)} (a secret, by its name) in a request"
            yield Finding("exfiltration", "ask", reason, piece)
            return
        if "cmdsub" in a.taint and regex(knowledge.SECRET_SOURCE).search(a.text):
            reason = f"`{piece}` puts the output of a command that reads secrets in a request"
            yield Finding("exfiltration", "ask", reason, piece)
            return


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
    nothing = inv.stdin.kind == "file" and inv.stdin.text == "/dev/null"
    if (
        inv.stdin.kind in ("file", "unknown", "literal")
        and not nothing
        and not (inv.program == "ssh" and inv.stdin.kind == "literal")
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
    values = knowledge.NET_VALUE_OPTS.get(inv.program or "", frozenset())
    args = inv.argv[1:]
    for index, a in enumerate(args):
        if a.lead_dynamic or (a.text.startswith("-") and "=" not in a.text):
            continue
        if (index and args[index - 1].text in values) or a.text.partition("=")[0] in values:
            continue  # the value of an option that names no destination
        for host in hosts.hosts_in(a.probe("0")):
            if host not in seen:
                seen.add(host)
                yield from scope.fetch_host(host, piece)
