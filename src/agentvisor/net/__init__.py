"""The host-side network layer: the only way anything agentvisor runs reaches a network.

- `guard`: reads URLs strictly, resolves once, classifies every address, dials only
  checked addresses (DNS pinning).
- `access`: the guard plus the policy engine: `NetworkAccess.admit` decides one
  destination (internal ones only by an exact host rule).
- `client`: `Fetcher`, the guarded HTTP client (redirects re-admitted, size and time caps).
- `secrets`: ``{{secret:NAME}}`` placeholders, substituted only toward a secret's hosts,
  and the `Redactor` that takes values back out.
- `tools`: `WebTools` with ``web_extract``, ``http_request`` and ``web_search``.
- `proxy` / `relay`: `EgressProxy`, a sandbox's only way out under ``--network proxy``;
  `http1`: its strict HTTP/1.1 reading; `intercept`: TLS terminated toward a secret's
  hosts with a per-run CA (``agentvisor run``); `harness`: the harness profiles.
- `visible`: what a browser would show of a page (``web_extract`` drops the rest).

Nothing here imports httpx, h11 or trafilatura until a request is made.
"""

from .access import Admission, NetworkAccess
from .client import Fetcher, FetchFailed, FetchResult
from .guard import Guard, Target, classify_ip, parse_url
from .proxy import EgressProxy
from .secrets import Redactor, SecretStore
from .tools import UnsupportedContent, WebTools

__all__ = [
    "Admission",
    "EgressProxy",
    "FetchFailed",
    "FetchResult",
    "Fetcher",
    "Guard",
    "NetworkAccess",
    "Redactor",
    "SecretStore",
    "Target",
    "UnsupportedContent",
    "WebTools",
    "classify_ip",
    "parse_url",
]
