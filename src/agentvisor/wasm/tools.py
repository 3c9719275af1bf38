"""`WasmTools`: the installed Wasm tools as the gateway sees them.

    tools = WasmTools.load(config)              # verified against the lock, compiled
    tools.list()                                # one entry per function, for MCP
    tools.call("wordcount", "count", {"path": "README.md"}, Context(workspace=...))

Each function is offered to agents as ``wasm_<tool>_<function>`` in the toolset
``wasm``. A call runs with exactly the capabilities the operator accepted at install
(read from the verified manifest, capped by the config's ``wasm`` ceilings); the call's
arguments and context choose nothing about them. The workspace comes from the context
the gateway builds for the session (else ``sandbox.workspace``, else the current
directory).

Refusals and failures are raised as `WasmError` (or `PolicyDenied`); everything the
tool returns and every message is passed through the secret redactor first.
"""

from __future__ import annotations

import builtins
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..actions import Context
from ..errors import AgentvisorError
from ..records import Declared
from .errors import BadArguments, ToolChanged, ToolFailed, ToolNotInstalled, WasmError
from .grants import env_pairs, preopens
from .hostfuncs import HostCalls, ToolAccess
from .manifest import Manifest, flow_labels
from .runtime import CallLimits, CallSetup, CompiledTool, Runtime
from .store import LockEntry, ToolStore

if TYPE_CHECKING:
    from ..net.access import NetworkAccess
    from ..net.client import Fetcher
    from ..net.secrets import Redactor, SecretStore

TOOLSET = "wasm"
PREFIX = "wasm_"


def tool_name(tool: str, function: str) -> str:
    """The name an agent calls: tool names have no '_', so the first '_' after the prefix
    separates tool from function."""
    return f"{PREFIX}{tool}_{function}"


def split_name(name: str) -> tuple[str, str] | None:
    if not name.startswith(PREFIX) or "_" not in name[len(PREFIX) :]:
        return None
    tool, _, function = name[len(PREFIX) :].partition("_")
    return tool, function


def argument_problem(validator: Any, arguments: dict[str, Any]) -> str | None:
    """The gateway checks this too; the Python API gets the same check here. It spares
    an agent a confusing answer, but a tool must still read its input as untrusted."""
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


def effective_limits(manifest: Manifest, ceiling: Any) -> CallLimits:
    """The manifest's limits, lowered to the operator's ``wasm`` ceilings."""
    asked = manifest.limits
    return CallLimits(
        memory_bytes=min(asked.memory_mb, ceiling.max_memory_mb) << 20,
        timeout=min(asked.timeout, ceiling.max_timeout),
        output_bytes=min(asked.output_kb, ceiling.max_output_kb) * 1024,
    )


def _validators(manifest: Manifest) -> dict[str, Any]:
    import jsonschema

    return {
        fn.name: jsonschema.validators.validator_for(
            fn.input_schema, jsonschema.Draft202012Validator
        )(fn.input_schema)
        for fn in manifest.functions
    }


class _Loaded(Declared):
    entry: LockEntry
    manifest: Manifest
    compiled: CompiledTool
    validators: dict[str, Any]  # function name -> its input schema's validator


class WasmTools:
    """The installed, verified Wasm tools, ready to call from any thread."""

    def __init__(
        self,
        config: Any,
        tools: dict[str, _Loaded],
        refused: dict[str, str],
        *,
        network: NetworkAccess | None = None,
        runtime: Runtime,
    ) -> None:
        self.config = config
        self._tools = tools
        self.refused = refused  # tool name -> why it is not offered (changed, invalid)
        self._network = network
        self._runtime = runtime
        self._secrets: SecretStore | None = None
        self._redactor: Redactor | None = None
        self._fetchers: dict[str, Fetcher] = {}
        self._protected: list[Path] | None = None
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        config: Any = None,
        *,
        store: ToolStore | None = None,
        network: NetworkAccess | None = None,
    ) -> WasmTools:
        """Every installed tool whose files match the lock; the others go to `refused`.

        ``network`` is the gateway's `NetworkAccess` (its policy, approval broker and
        audit sink); without one it is built from ``config`` at the first request.
        """
        from ..config import Config

        config = config if config is not None else Config()
        store = store or ToolStore()
        runtime = Runtime.shared()
        tools: dict[str, _Loaded] = {}
        refused: dict[str, str] = {}
        for name in store.entries():
            try:
                installed = store.open(name)
                compiled = runtime.compile(installed.manifest, installed.module_bytes)
            except WasmError as exc:
                refused[name] = str(exc)
                continue
            tools[name] = _Loaded(
                installed.entry, installed.manifest, compiled, _validators(installed.manifest)
            )
        return cls(config, tools, refused, network=network, runtime=runtime)

    def close(self) -> None:
        with self._lock:
            for fetcher in self._fetchers.values():
                fetcher.close()
            self._fetchers.clear()

    def __enter__(self) -> WasmTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the gateway offers -----------------------------------------------------

    def list(self) -> list[dict[str, Any]]:
        """One entry per function: the MCP name, description, input schema and the flow
        labels its tool's capabilities give it (`manifest.flow_labels`)."""
        out = []
        for name in sorted(self._tools):
            manifest = self._tools[name].manifest
            labels = sorted(flow_labels(manifest.capabilities))
            for fn in manifest.functions:
                out.append(
                    {
                        "name": tool_name(name, fn.name),
                        "toolset": TOOLSET,
                        "tool": name,
                        "function": fn.name,
                        "version": manifest.version,
                        "description": f"{fn.description.strip()} (Wasm tool {name}: "
                        f"{manifest.description.strip()})",
                        "input_schema": fn.input_schema,
                        "labels": labels,
                    }
                )
        return out

    def call_name(
        self, name: str, arguments: Any, context: Context | None = None
    ) -> dict[str, Any]:
        """`call` by the name `list` gave, e.g. ``wasm_wordcount_count``."""
        parts = split_name(name)
        if parts is None:
            raise ToolNotInstalled(f"{name!r} is not a Wasm tool name (wasm_TOOL_FUNCTION)")
        return self.call(*parts, arguments, context)

    def call(
        self, tool: str, function: str, arguments: Any, context: Context | None = None
    ) -> dict[str, Any]:
        """Run one function of one tool; its result object, or a `WasmError`."""
        loaded = self._loaded(tool)
        fn = loaded.manifest.function(function)
        if fn is None:
            names = ", ".join(f.name for f in loaded.manifest.functions)
            raise ToolNotInstalled(
                f"Wasm tool {tool} has no function {function!r} (it has: {names})"
            )
        if not isinstance(arguments, dict):
            raise BadArguments(f"{tool_name(tool, function)}: the arguments must be a JSON object")
        problem = argument_problem(loaded.validators[function], arguments)
        if problem:
            raise BadArguments(f"{tool_name(tool, function)}: invalid arguments: {problem}")
        context = context or Context()
        payload = json.dumps(arguments, ensure_ascii=False).encode("utf-8")
        try:
            raw = self._run(loaded, function, payload, context)
            return self._result(tool, raw)
        except AgentvisorError as exc:
            exc.args = tuple(self._redact().text(a) if isinstance(a, str) else a for a in exc.args)
            raise

    # -- one call ----------------------------------------------------------------------

    def _loaded(self, tool: str) -> _Loaded:
        if tool in self._tools:
            return self._tools[tool]
        if tool in self.refused:
            raise ToolChanged(self.refused[tool])
        known = ", ".join(sorted(self._tools)) or "none"
        raise ToolNotInstalled(f"no Wasm tool named {tool!r} is installed (installed: {known})")

    def _run(self, loaded: _Loaded, function: str, payload: bytes, context: Context) -> bytes:
        caps = loaded.manifest.capabilities
        name = loaded.manifest.name
        fetcher = (lambda: self._fetcher(loaded)) if caps.network else None
        host = HostCalls(tool_name(name, function), fetcher, context.session)
        workspace = context.workspace or self.config.sandbox.workspace or os.getcwd()
        protected = self._protected_paths() if caps.files else []
        with preopens(
            caps.files,
            workspace,
            protected=protected,
            readonly=tuple(self.config.sandbox.readonly_paths),
        ) as dirs:
            setup = CallSetup(
                limits=effective_limits(loaded.manifest, self.config.wasm),
                host=host,
                preopens=dirs,
                env=env_pairs(caps.env, os.environ),
            )
            return self._runtime.run(loaded.compiled, function, payload, setup)

    def _result(self, tool: str, raw: bytes) -> dict[str, Any]:
        try:
            result = json.loads(raw.decode("utf-8"))
        except ValueError:
            raise ToolFailed(f"{tool}: returned something that is not UTF-8 JSON") from None
        if not isinstance(result, dict):
            raise ToolFailed(f"{tool}: must return a JSON object, returned {type(result).__name__}")
        result = self._redact().any(result)
        if "error" in result:
            raise ToolFailed(f"{tool}: {result['error']}")
        return result

    # -- shared, built once -----------------------------------------------------------

    def _protected_paths(self) -> builtins.list[Path]:  # `list` is a method here
        """The paths no tool may see, resolved once."""
        if self._protected is None:
            from ..protected import protected_paths

            self._protected = [
                Path(os.path.realpath(p))
                for p in protected_paths(self.config.sandbox.protected_paths)
            ]
        return self._protected

    def _secret_store(self) -> SecretStore:
        from ..net.secrets import SecretStore

        with self._lock:
            if self._secrets is None:
                self._secrets = SecretStore.from_config(self.config)
            return self._secrets

    def _redact(self) -> Redactor:
        if self._redactor is None:
            self._redactor = self._secret_store().redactor()
        return self._redactor

    def _fetcher(self, loaded: _Loaded) -> Fetcher:
        """The tool's own guarded client: the network layer behind its capability gate."""
        from ..net.access import NetworkAccess
        from ..net.client import Fetcher

        secrets = self._secret_store()
        with self._lock:
            name = loaded.manifest.name
            if name not in self._fetchers:
                if self._network is None:
                    self._network = NetworkAccess.from_config(self.config)
                caps = loaded.manifest.capabilities
                gate = ToolAccess(self._network, name, caps.network, caps.secrets)
                net = self.config.network
                timeout = effective_limits(loaded.manifest, self.config.wasm).timeout
                self._fetchers[name] = Fetcher(
                    # ToolAccess has the NetworkAccess methods a Fetcher calls, narrowed.
                    gate,  # type: ignore[arg-type]
                    secrets=secrets,
                    max_bytes=net.max_response_bytes,
                    timeout=min(net.timeout, timeout),
                    max_redirects=net.max_redirects,
                    ca_file=net.ca_file,
                )
            return self._fetchers[name]
