"""The host-side web tools: ``web_extract``, ``http_request`` and ``web_search``.

Each runs on the host through the guarded `Fetcher` (destination guard, policy, caps,
secret placeholders) and returns a plain dict, redacted, ready to hand to an agent.
"""

from __future__ import annotations

import base64
from typing import Any, Protocol
from urllib.parse import quote_plus

from ..errors import AgentvisorError, ConfigError
from ..records import Declared
from .client import Fetcher, FetchResult
from .secrets import placeholder

# Media types returned as text as they are; everything else that is not HTML is binary.
_TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/x-ndjson",
    "application/ld+json",
    "application/rss+xml",
    "application/atom+xml",
    "application/xhtml+xml",
    "application/sql",
    "application/graphql",
)
_HTML_TYPES = ("text/html", "application/xhtml+xml")


class UnsupportedContent(AgentvisorError):
    """The response is binary (an image, archive, PDF, ...), which the tool does not return."""


def is_text(mime: str) -> bool:
    return mime.startswith(_TEXT_TYPES) or mime.endswith(("+json", "+xml"))


def looks_binary(data: bytes) -> bool:
    return b"\0" in data[:4096]


class WebTools:
    """The three web tools for one session, sharing one guarded client."""

    def __init__(
        self, fetcher: Fetcher, *, search: SearchProvider | None = None, session: str | None = None
    ) -> None:
        self.fetcher = fetcher
        self.search_provider = search
        self.session = session

    @classmethod
    def from_config(
        cls, config: Any, *, session: str | None = None, fetcher: Fetcher | None = None
    ) -> WebTools:
        fetcher = fetcher or Fetcher.from_config(config)
        return cls(fetcher, search=search_provider(config.web_search), session=session)

    def close(self) -> None:
        self.fetcher.close()

    def __enter__(self) -> WebTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def web_extract(self, url: str) -> dict[str, Any]:
        """GET a page and return its readable text (Markdown for HTML)."""
        result = self.fetcher.request("GET", url, tool="web_extract", session=self.session)
        mime = result.mime
        if mime in _HTML_TYPES or (
            not mime
            and result.content.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))
        ):
            title, text = extract_html(result.text(), result.url)
        elif (is_text(mime) or not mime) and not looks_binary(result.content):
            title, text = None, result.text()
        else:
            raise UnsupportedContent(
                f"{result.url} returned {mime or 'unlabelled binary data'} "
                f"({len(result.content)} bytes): web_extract returns text only; binary "
                "content (images, archives, PDFs, ...) is not passed on"
            )
        return self._redact(
            {
                "url": result.url,
                "status": result.status,
                "content_type": result.content_type,
                "title": title,
                "text": text,
                "truncated": result.truncated,
                "redirects": list(result.redirects),
            }
        )

    def http_request(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: str | bytes | None = None,
    ) -> dict[str, Any]:
        """Any method, for APIs; secrets go in as ``{{secret:NAME}}`` placeholders."""
        result = self.fetcher.request(
            method,
            url,
            headers=headers,
            body=body,
            tool="http_request",
            session=self.session,
            inject_headers=True,
        )
        return self._redact(response_dict(result))

    def web_search(self, query: str, max_results: int | None = None) -> dict[str, Any]:
        """Search through the configured provider; results are title, url, snippet."""
        if self.search_provider is None:
            raise ConfigError(
                "web_search: no search provider is configured. Add to the config either\n"
                "  web_search: {provider: searxng, url: https://searx.example.org}\n"
                "or a search API whose key is a secret:\n"
                "  secrets: [{name: BRAVE_API_KEY, env: BRAVE_API_KEY, "
                "hosts: [api.search.brave.com]}]\n"
                "  web_search: {provider: brave, api_key_secret: BRAVE_API_KEY}\n"
                "and a fetch rule allowing the provider's host (see docs/network.md)"
            )
        results = self.search_provider.search(self.fetcher, query, max_results, self.session)
        return self._redact(
            {"query": query, "provider": self.search_provider.name, "results": results}
        )

    def _redact(self, value: dict[str, Any]) -> dict[str, Any]:
        return self.fetcher.secrets.redactor().any(value)


def response_dict(result: FetchResult) -> dict[str, Any]:
    """An API response as the agent (or a Wasm tool) gets it: text as text, else base64."""
    out: dict[str, Any] = {
        "url": result.url,
        "status": result.status,
        "headers": result.headers,
        "content_type": result.content_type,
        "truncated": result.truncated,
        "redirects": list(result.redirects),
    }
    if (is_text(result.mime) or not result.mime) and not looks_binary(result.content):
        out["body"] = result.text()
    else:
        out["body_base64"] = base64.b64encode(result.content).decode("ascii")
    return out


def extract_html(html: str, url: str) -> tuple[str | None, str]:
    """Readable Markdown from an HTML page.

    trafilatura: among open-source main-content extractors it scores at or near the top
    of the independent evaluations (ScrapingHub's article-extraction benchmark, Bevendorff
    et al. 2023), it is actively maintained, works offline on lxml (no JavaScript, no
    network of its own), drops navigation and boilerplate, and writes Markdown directly.
    """
    import trafilatura

    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_comments=False,
        favor_recall=True,
        with_metadata=False,
    )
    if not text:  # pages with no main article (link lists, apps): all visible text
        text = trafilatura.html2txt(html) or ""
    metadata = trafilatura.extract_metadata(html, default_url=url)
    title = metadata.title if metadata is not None else None
    return title, text


# --- search providers -------------------------------------------------------------------


class SearchProvider(Protocol):
    @property
    def name(self) -> str: ...

    def search(
        self, fetcher: Fetcher, query: str, max_results: int | None, session: str | None
    ) -> list[dict[str, str]]: ...


class SearxngProvider(Declared):
    """A SearXNG instance with the JSON output format enabled."""

    url: str
    max_results: int = 10
    name: str = "searxng"

    def search(
        self, fetcher: Fetcher, query: str, max_results: int | None, session: str | None
    ) -> list[dict[str, str]]:
        url = f"{self.url.rstrip('/')}/search?q={quote_plus(query)}&format=json"
        data = _json(fetcher.request("GET", url, tool="web_search", session=session), self.name)
        results = data.get("results", []) if isinstance(data, dict) else []
        return [
            {
                "title": str(r.get("title", "")),
                "url": str(r.get("url", "")),
                "snippet": str(r.get("content", "")),
            }
            for r in results[: max_results or self.max_results]
            if isinstance(r, dict)
        ]


class BraveProvider(Declared):
    """The Brave Search API; its key is a secret, sent only to the API's host."""

    secret: str
    url: str = "https://api.search.brave.com/res/v1/web/search"
    max_results: int = 10
    name: str = "brave"

    def search(
        self, fetcher: Fetcher, query: str, max_results: int | None, session: str | None
    ) -> list[dict[str, str]]:
        count = max_results or self.max_results
        url = f"{self.url}?q={quote_plus(query)}&count={count}"
        result = fetcher.request(
            "GET",
            url,
            tool="web_search",
            session=session,
            headers={
                "Accept": "application/json",
                "X-Subscription-Token": placeholder(self.secret),
            },
        )
        data = _json(result, self.name)
        web = data.get("web", {}) if isinstance(data, dict) else {}
        results = web.get("results", []) if isinstance(web, dict) else []
        return [
            {
                "title": str(r.get("title", "")),
                "url": str(r.get("url", "")),
                "snippet": str(r.get("description", "")),
            }
            for r in results[:count]
            if isinstance(r, dict)
        ]


def search_provider(config: Any) -> SearchProvider | None:
    if config.provider == "searxng":
        return SearxngProvider(config.url, config.max_results)
    if config.provider == "brave":
        return BraveProvider(
            config.api_key_secret,
            **({"url": config.url} if config.url else {}),
            max_results=config.max_results,
        )
    return None


def _json(result: FetchResult, provider: str) -> Any:
    import json

    if result.status != 200:
        raise AgentvisorError(
            f"web_search: {provider} answered HTTP {result.status} from {result.url}"
        )
    try:
        return json.loads(result.content)
    except ValueError:
        raise AgentvisorError(
            f"web_search: {provider} did not return JSON from "
            f"{result.url} (for SearXNG, enable the json format in "
            "settings.yml: search.formats)"
        ) from None
