"""Secrets the agent refers to by placeholder and never holds.

The agent writes ``{{secret:NAME}}`` in a request's URL, headers or body. The value
is put in only when the host the request actually connects to (the checked URL host,
which is also the TLS SNI name, never a ``Host`` header) is one of the secret's
``hosts``; otherwise the whole request is refused before anything is sent. Whatever
comes back passes the `Redactor`, which turns the value, and its encoded forms
(percent-encoding in either case, ``+`` for space, JSON escapes, HTML entities, base64,
hex), back into the placeholder. `redact_text` is the one function every stored or shown
text goes through; it also catches fragments of a value (errors quoting part of a key).
"""

from __future__ import annotations

import base64
import binascii
import html.entities
import logging
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, NetworkBlocked
from ..records import Declared

PLACEHOLDER = re.compile(r"\{\{\s*secret:([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
# Encoded forms shorter than this are not redacted: they would match ordinary text.
_MIN_DERIVED = 8
# Runs of a value at least this long (shorter for short values) are redacted in errors.
_MIN_FRAGMENT = 6
# The longest form one character of a value takes (a hex entity with leading zeros).
_MAX_CHAR_FORM = 18


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
    proxy_body: bool = False  # the intercepting proxy fills it in request bodies too

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
                Secret(
                    name=s.name,
                    hosts=tuple(s.hosts),
                    env=s.env,
                    file=s.file,
                    header=s.header,
                    proxy_body=s.proxy_body,
                )
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

    def substitute(self, text: str, host: str, port: int, only: set[str] | None = None) -> str:
        """Put values in for placeholders (those of ``only``, if given; the others stay
        text); refuses if any of them may not go to ``host``."""

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if only is not None and name not in only:
                return match.group(0)
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
    """Replaces secret values, and the common encodings of them, by their placeholders.

    One pattern per secret matches the value with each character written in any of the
    ways text that carries it commonly writes it, mixed freely: as itself, percent-encoded
    (either case), ``+`` for a space, a JSON ``\\u`` or short escape, an HTML entity
    (named, decimal or hex). Forms that encode the value as a whole (base64 at each
    alignment, hex) are matched as literal strings. ``fragments`` also replaces runs of at
    least a few characters of a value (error messages that quote part of a key).
    """

    def __init__(self, values: Mapping[str, str]) -> None:
        usable = sorted(
            ((name, value) for name, value in values.items() if value),
            key=lambda item: -len(item[1]),  # longest first: a value inside another stays whole
        )
        self._values = [(value, placeholder(name)) for name, value in usable]
        # One regex per secret: a union of them would defeat the regex engine's scan for
        # the first character, which makes a 10 MB body several times slower.
        self._patterns = [
            (re.compile(pattern), re.compile(pattern.encode("utf-8")), placeholder(name))
            for name, pattern in ((name, _value_pattern(value)) for name, value in usable)
        ]
        forms: dict[bytes, str] = {}
        for name, value in usable:
            for form in _whole_forms(value.encode("utf-8")):
                forms.setdefault(form, placeholder(name))
        self._forms = sorted(forms.items(), key=lambda item: -len(item[0]))
        self._text_forms = [(f.decode("ascii"), p) for f, p in self._forms]

    def __bool__(self) -> bool:
        return bool(self._values)

    @property
    def longest_match(self) -> int:
        """The most bytes one redacted form can span (for redacting a stream)."""
        longest_value = max((len(value.encode("utf-8")) for value, _ in self._values), default=0)
        longest_form = max((len(form) for form, _ in self._forms), default=0)
        return max(_MAX_CHAR_FORM * longest_value, longest_form)

    def stream(self) -> StreamRedactor:
        return StreamRedactor(self)

    def bytes(self, data: bytes) -> bytes:
        for _, pattern, name in self._patterns:
            data = pattern.sub(name.encode("ascii"), data)
        for form, name in self._forms:
            if form in data:
                data = data.replace(form, name.encode("ascii"))
        return data

    def text(self, text: str, *, fragments: bool = False) -> str:
        for pattern, _, name in self._patterns:
            text = pattern.sub(name, text)
        for form, name in self._text_forms:
            if form in text:
                text = text.replace(form, name)
        if fragments:
            for value, name in self._values:
                text = _redact_fragments(text, value, name)
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


class StreamRedactor:
    """Redacts a byte stream chunk by chunk (a response relayed as it arrives): the last
    `Redactor.longest_match` bytes are held back, so a value split across two chunks is
    still caught; `flush` releases them at the end."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._hold = redactor.longest_match
        self._tail = b""

    def feed(self, data: bytes) -> bytes:
        if not self._redactor:
            return data
        buffer = self._redactor.bytes(self._tail + data)
        if len(buffer) <= self._hold:
            self._tail = buffer
            return b""
        self._tail = buffer[len(buffer) - self._hold :]
        return buffer[: len(buffer) - self._hold]

    def flush(self) -> bytes:
        out, self._tail = self._redactor.bytes(self._tail), b""
        return out


def redact_text(text: str, secrets: SecretStore | Redactor | Mapping[str, str]) -> str:
    """``text`` with every secret value, in every encoding `Redactor` knows and in
    fragments, replaced by its placeholder: the one function for any text that is stored
    or shown to a person (audit reasons, approval texts, errors, network events)."""
    if isinstance(secrets, SecretStore):
        redactor = secrets.redactor()
    elif isinstance(secrets, Redactor):
        redactor = secrets
    else:
        redactor = Redactor(secrets)
    return redactor.text(text, fragments=True)


# JSON's two-character escapes (RFC 8259 section 7) for the characters that have one.
_JSON_SHORT = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _hex_digits(number: int, width: int = 0) -> str:
    """A regex for ``number`` in hex, either case."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in format(number, f"0{width}x"))


def _char_pattern(char: str) -> str:
    """Every common way text writes one character of a secret, as an ASCII regex (the
    character itself aside), so that the same pattern serves text and UTF-8 bytes."""
    code = ord(char)
    forms = [re.escape(char), "".join("%" + _hex_digits(b, 2) for b in char.encode("utf-8"))]
    if char == " ":
        forms.append(r"\+")
    if code > 0xFFFF:  # JSON writes characters outside the BMP as a surrogate pair
        high, low = divmod(code - 0x10000, 0x400)
        forms.append(rf"\\u{_hex_digits(0xD800 + high, 4)}\\u{_hex_digits(0xDC00 + low, 4)}")
    else:
        forms.append(rf"\\u{_hex_digits(code, 4)}")
    if char in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[char]))
    # Leading zeros bounded, so that a match has a bounded length (`StreamRedactor`).
    forms.append(rf"&#0{{0,8}}{code};?")
    forms.append(rf"&#[xX]0{{0,8}}{_hex_digits(code)};?")
    named = html.entities.codepoint2name.get(code)
    if named:
        forms.append(f"&{named};")
    if char == "'":
        forms.append("&apos;")
    return "(?:" + "|".join(forms) + ")"


def _value_pattern(value: str) -> str:
    return "".join(_char_pattern(char) for char in value)


def _whole_forms(raw: bytes) -> set[bytes]:
    """Encodings of the value as a whole: hex, and base64 at each of the three alignments
    it can have inside a longer encoded string (e.g. "user:TOKEN" in Basic auth), keeping
    only the characters that depend on the value alone."""
    derived = {binascii.hexlify(raw), binascii.hexlify(raw).upper(), base64.b64encode(raw)}
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * offset + raw)
            start = -(-8 * offset // 6)
            stop = 8 * (offset + len(raw)) // 6
            derived.add(encoded[start:stop])
    return {f for f in derived if len(f) >= _MIN_DERIVED}


def _classes(text: str) -> int:
    """How many of lower case, upper case, digits and other characters ``text`` mixes."""
    return sum(
        (
            any(c.islower() for c in text),
            any(c.isupper() for c in text),
            any(c.isdigit() for c in text),
            any(not c.isalnum() for c in text),
        )
    )


def _redact_fragments(text: str, value: str, name: str) -> str:
    """Replace each run of ``text`` that is part of ``value``, at least a few characters
    long and mixing at least two kinds of character (so a word a value happens to contain
    stays). Hand-written (a k-gram scan): no library offers substring redaction."""
    size = min(_MIN_FRAGMENT, max(4, len(value) // 2))
    if len(value) < 4 or len(text) < size:
        return text
    grams = {value[i : i + size] for i in range(len(value) - size + 1)}
    out, start, i = [], 0, 0
    while i <= len(text) - size:
        if text[i : i + size] not in grams:
            i += 1
            continue
        end = i + size
        while end < len(text) and text[i : end + 1] in value:
            end += 1
        if _classes(text[i:end]) < 2:  # "granted" from "granted-value-1": an ordinary word
            i += 1
            continue
        out += [text[start:i], name]
        start = i = end
    out.append(text[start:])
    return "".join(out)


class _RedactingFilter(logging.Filter):
    """Redacts the secrets of every registered store from log messages."""

    def __init__(self) -> None:
        super().__init__()
        self.stores: weakref.WeakSet[SecretStore] = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        message = original = record.getMessage()
        for store in list(self.stores):
            message = store.redactor().text(message, fragments=True)
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
