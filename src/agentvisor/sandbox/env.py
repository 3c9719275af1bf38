"""The environment a sandboxed command sees: a small allowlist, never the caller's secrets.

Only harmless variables pass by default. ``sandbox.env_passthrough`` adds names, but a
name that looks like a credential is still dropped unless it is also listed in
``sandbox.env_passthrough_secrets`` — a separate, explicit setting that warns each time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..records import Declared

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

ALLOWED_BY_DEFAULT: tuple[str, ...] = (
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_COLLATE",
    "LC_NUMERIC",
    "LC_TIME",
    "TERM",
    "COLORTERM",
    "TZ",
    "NO_COLOR",
    "COLUMNS",
    "LINES",
)

# Substrings that mark a variable name as a credential (compared case-insensitively).
CREDENTIAL_MARKERS: tuple[str, ...] = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDS",
    "AUTH",
    "BEARER",
    "DSN",
    "WEBHOOK",
    "PRIVATE",
    "COOKIE",
    "SESSION",
)
_CREDENTIAL_RE = re.compile("|".join(CREDENTIAL_MARKERS), re.IGNORECASE)


def looks_like_credential(name: str) -> bool:
    return bool(_CREDENTIAL_RE.search(name))


class SandboxEnv(Declared):
    env: dict[str, str]
    dropped: tuple[str, ...]  # passthrough names refused because they look like credentials
    forwarded_secrets: tuple[str, ...]  # credential-like names forwarded on explicit request


def build_env(
    caller_env: Mapping[str, str],
    *,
    home: str,
    passthrough: Iterable[str] = (),
    passthrough_secrets: Iterable[str] = (),
) -> SandboxEnv:
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "USER": "agent",
        "LOGNAME": "agent",
        "SHELL": "/bin/sh",
        "TMPDIR": "/tmp",
    }
    for name in ALLOWED_BY_DEFAULT:
        if name in caller_env:
            env[name] = caller_env[name]
    dropped = []
    for name in passthrough:
        if name not in caller_env:
            continue
        if looks_like_credential(name):
            dropped.append(name)
        else:
            env[name] = caller_env[name]
    forwarded = []
    for name in passthrough_secrets:
        if name in caller_env:
            env[name] = caller_env[name]
            forwarded.append(name)
    return SandboxEnv(env=env, dropped=tuple(dropped), forwarded_secrets=tuple(forwarded))
