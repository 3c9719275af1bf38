"""Secrets the agent refers to by placeholder and never holds.

The agent writes ``{{secret:NAME}}`` in a request's URL, headers or body. The value
is put in only when the host the request actually connects to (the checked URL host,
which is also the TLS SNI name, never a ``Host`` header) is one of the secret's
``hosts``; otherwise the whole request is refused before anything is sent. Whatever
comes back passes the `Redactor`, which turns the value, and its URL-encoded, base64
and hex forms, back into the placeholder.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from ..errors import ConfigError, NetworkBlocked
from ..records import Declared

PLACEHOLDER = re.compile(r"\{\{\s*secret:([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
# Encoded forms shorter than this are not redacted: they would match ordinary text.
_MIN_DERIVED = 8


def placeholder(name: str) -> str:
    return "{{secret:" + name + "}}"


def names_in(text: str) -> set[str]:
    return set(PLACEHOLDER.findall(text))


def host_matches(patterns: Iterable[str], host: str, port: int) -> bool:
    """``api.github.com``, ``api.github.com:8443`` or ``*.github.com`` (subdomains only)."""
    for pattern in patterns:
        name, sep, want_port = pattern.lower().rpartition(":")
        if not sep or not want_port.isdigit():
            name, want_port = pattern.lower(), ""
        name = name.strip("[]").rstrip(".")
        if want_port and int(want_port) != port:
            continue
        if name.startswith("*."):
            if host.endswith(name[1:]) and len(host) > len(name) - 1:
                return True
        elif host == name:
            return True
    return False


class Secret(Declared):
    name: str
    hosts: tuple[str, ...]
    env: str | None = None
    file: str | None = None
    header: str | None = None  # "Authorization: Bearer {value}"

    def load(self) -> str:
        if self.env:
            value = os.environ.get(self.env)
            if not value:
                raise ConfigError(
                    f"secret {self.name}: environment variable {self.env} is not set on the host"
                )
            return value
        if self.file:
            try:
                return Path(os.path.expanduser(self.file)).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    f"secret {self.name}: cannot read {self.file}: {exc.strerror}"
                ) from None
        raise ConfigError(f"secret {self.name}: no source (set env or file)")

    def header_parts(self) -> tuple[str, str] | None:
        if not self.header:
            return None
        name, _, template = self.header.partition(":")
        return name.strip(), template.strip()


class SecretStore:
    """The configured secrets; values are read from the host when first needed."""

    def __init__(self, secrets: Sequence[Secret] = ()) -> None:
        self._secrets = {s.name: s for s in secrets}
        self._values: dict[str, str] = {}
        self._redactor: Redactor | None = None

    @classmethod
    def from_config(cls, config: Any) -> SecretStore:
        return cls(
            [
                Secret(name=s.name, hosts=tuple(s.hosts), env=s.env, file=s.file, header=s.header)
                for s in config.secrets
            ]
        )

    @property
    def names(self) -> list[str]:
        return sorted(self._secrets)

    def get(self, name: str) -> Secret:
        try:
            return self._secrets[name]
        except KeyError:
            known = ", ".join(self.names) or "none configured"
            raise NetworkBlocked(
                f"unknown secret {placeholder(name)} (known: {known}); "
                "secrets are defined under secrets: in the config",
                rule=f"secret:{name}",
            ) from None

    def value(self, name: str) -> str:
        if name not in self._values:
            self._values[name] = self.get(name).load()
        return self._values[name]

    def allowed_for(self, name: str, host: str, port: int) -> bool:
        return host_matches(self.get(name).hosts, host, port)

    def auto_headers(self, host: str, port: int) -> list[Secret]:
        """Secrets with a ``header`` template whose hosts include this one."""
        return [s for s in self._secrets.values() if s.header and host_matches(s.hosts, host, port)]

    def substitute(self, text: str, host: str, port: int) -> str:
        """Put values in for placeholders; refuses if any secret may not go to ``host``."""

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if not self.allowed_for(name, host, port):
                raise refused_secret(self.get(name), host)
            return self.value(name)

        return PLACEHOLDER.sub(value, text)

    def redactor(self) -> Redactor:
        """A redactor for every secret whose value can be read (used or not)."""
        if self._redactor is not None:
            return self._redactor
        values = {}
        for name in self._secrets:
            try:
                values[name] = self.value(name)
            except ConfigError:
                continue
        redactor = Redactor(values)
        if len(values) == len(self._secrets):  # a missing value may appear later
            self._redactor = redactor
        return redactor


def refused_secret(secret: Secret, host: str) -> NetworkBlocked:
    allowed = ", ".join(secret.hosts) or "no host"
    return NetworkBlocked(
        f"refused: secret {placeholder(secret.name)} may only be sent to {allowed}, not to "
        f"{host}; nothing was sent",
        destination=host,
        rule=f"secret:{secret.name}",
    )


class Redactor:
    """Replaces secret values, and common encodings of them, by their placeholders."""

    def __init__(self, values: Mapping[str, str]) -> None:
        forms: dict[bytes, str] = {}
        for name, value in values.items():
            if not value:
                continue
            for form in _forms(value.encode("utf-8")):
                forms.setdefault(form, placeholder(name))
        # Longest first, so a value inside a longer encoded form does not split it.
        self._forms = sorted(forms.items(), key=lambda item: -len(item[0]))
        self._text = [
            (f.decode("ascii", "replace") if f.isascii() else f.decode("utf-8", "replace"), p)
            for f, p in self._forms
        ]

    def __bool__(self) -> bool:
        return bool(self._forms)

    def bytes(self, data: bytes) -> bytes:
        for form, name in self._forms:
            if form in data:
                data = data.replace(form, name.encode("ascii"))
        return data

    def text(self, text: str) -> str:
        for form, name in self._text:
            if form in text:
                text = text.replace(form, name)
        return text

    def any(self, value: Any) -> Any:
        """Redact strings inside nested dicts, lists and tuples (tool results)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes):
            return self.bytes(value)
        if isinstance(value, Mapping):
            return {self.any(k): self.any(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.any(v) for v in value)
        return value


def _forms(raw: bytes) -> set[bytes]:
    forms = {raw}
    text = raw.decode("utf-8")
    derived = {
        quote(text, safe="").encode(),
        quote(text).encode(),
        quote_plus(text).encode(),
        json.dumps(text)[1:-1].encode(),
        binascii.hexlify(raw),
        binascii.hexlify(raw).upper(),
    }
    # base64 of the value at each of the three alignments it can have inside a longer
    # encoded string (e.g. "user:TOKEN" in Basic auth): keep only the characters that
    # depend on the value alone.
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + raw)
            start = -(-8 * offset // 6)
            stop = 8 * (offset + len(raw)) // 6
            derived.add(encoded[start:stop])
        derived.add(base64.b64encode(raw))
    forms |= {f for f in derived if len(f) >= _MIN_DERIVED}
    return forms


class _RedactingFilter(logging.Filter):
    """Redacts the secrets of every registered store from log messages."""

    def __init__(self) -> None:
        super().__init__()
        self.stores: weakref.WeakSet[SecretStore] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        message = original = record.getMessage()
        for store in list(self.stores):
            message = store.redactor().text(message)
        if message != original:
            record.msg, record.args = message, None
        return True


_LOG_FILTER = _RedactingFilter()
LOGGERS = ("agentvisor.net", "agentvisor.net.proxy")


def redact_logs(store: SecretStore) -> None:
    """Keep this store's values out of the network layer's log records."""
    if not store.names:
        return
    _LOG_FILTER.stores.add(store)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _LOG_FILTER not in logger.filters:
            logger.addFilter(_LOG_FILTER)
