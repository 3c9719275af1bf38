"""Helpers for the Wasm tool tests: tool directories around the probe, a test policy,
and a loopback HTTP server.

The probe (probe/main.c) is one module with a function per thing a tool might try:
read, write, env, http, spin, grab, crash, quit, big, echo, wild. A test writes a
manifest that grants exactly what it means to grant and installs it into a temporary
store.
"""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from agentvisor.actions import Action, Context, Decision
from agentvisor.config import config_from_dict
from agentvisor.wasm import ToolStore, WasmTools, read_package
from agentvisor.wasm.runtime import Runtime

PROBE_FUNCTIONS = (
    "read",
    "write",
    "env",
    "http",
    "spin",
    "grab",
    "crash",
    "quit",
    "big",
    "echo",
    "wild",
)


def probe_manifest(
    name: str = "probe",
    *,
    capabilities: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "version": "1.0.0",
        "description": "tries things, reports what happened",
        "functions": [
            {"name": f, "description": f"probe {f}", "input_schema": {"type": "object"}}
            for f in PROBE_FUNCTIONS
        ],
        "capabilities": capabilities or {},
        "limits": {"memory_mb": 16, "timeout": 5, "output_kb": 64, **(limits or {})},
    }


def tool_dir(root: Path, module: Path, manifest: dict[str, Any]) -> Path:
    """A tool directory: the manifest as YAML and the module beside it."""
    folder = root / f"src-{manifest['name']}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tool.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    shutil.copyfile(module, folder / manifest.get("module", "tool.wasm"))
    return folder


def install(store: ToolStore, folder: Path) -> None:
    """What `agentvisor tool install --yes` does after the operator accepted."""
    package = read_package(folder)
    Runtime.shared().compile(package.manifest, package.module_bytes)
    store.install(package)


def config(**sections: Any) -> Any:
    return config_from_dict(sections)


class AllowList:
    """A policy that allows fetches to listed host:port pairs and every secret use.

    It stands in for the policy engine so a test controls exactly which destinations the
    network layer admits, and can tell the tool's own grants apart from the policy.
    """

    def __init__(self, *hostports: str) -> None:
        self.allow = set(hostports)

    def decide(self, action: Action, context: Context) -> Decision:
        if action.kind == "secret":
            return Decision("allow", "test policy: secrets allowed", rule="test:secret")
        from agentvisor.net.guard import parse_hostport, parse_url

        target = (
            parse_url(action.target) if "://" in action.target else parse_hostport(action.target)
        )
        if target.hostport in self.allow:
            return Decision("allow", f"test policy allows {target.hostport}", rule="test:allow")
        return Decision("deny", f"test policy denies {target.hostport}", rule="test:deny")

    def allows_exact_host(self, host: str, port: int, context: Context) -> Decision | None:
        if f"{host}:{port}" in self.allow:
            return Decision("allow", f"test policy allows {host}:{port}", rule="test:allow")
        return None


def network(*hostports: str) -> Any:
    from agentvisor.net.access import NetworkAccess

    return NetworkAccess(AllowList(*hostports))


def load(store: ToolStore, cfg: Any = None, net: Any = None) -> WasmTools:
    return WasmTools.load(cfg if cfg is not None else config(), store=store, network=net)


class Server:
    """An HTTP server on 127.0.0.1: /echo answers with the request as JSON,
    /redirect?to=URL redirects. Records every request it received."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                seen = {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "body": body,
                }
                owner.requests.append(seen)
                parts = urlsplit(self.path)
                if parts.path == "/redirect":
                    target = parse_qs(parts.query)["to"][0]
                    self._send(302, b"", {"Location": target})
                else:
                    self._send(200, json.dumps(seen).encode(), {"Content-Type": "application/json"})

            do_POST = do_GET

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.hostport = f"127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path: str = "/echo") -> str:
        return f"http://{self.hostport}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
