"""Tools as WebAssembly modules: deny-by-default, installed like packages (docs/wasm.md).

- `manifest`: ``tool.yaml``, what a tool is and the capabilities it asks for;
- `store`: installing (after the operator accepted), the lock file of SHA-256 hashes,
  and loading with the hashes checked;
- `grants`: the accepted capabilities turned into preopened directories and variables;
- `hostfuncs`: ``agentvisor.http_request``, through the network layer behind the tool's
  own host and secret grants;
- `runtime`: wasmtime with WASI, a memory limit, epoch interruption, an output limit;
- `tools`: `WasmTools`, what the gateway lists and calls.

Nothing here imports wasmtime until a tool is compiled.
"""

from .errors import (
    BadArguments,
    InstallRefused,
    LimitExceeded,
    ManifestError,
    ToolChanged,
    ToolFailed,
    ToolNotInstalled,
    WasmError,
)
from .manifest import Manifest, describe, parse_manifest
from .store import Package, ToolStore, read_package
from .tools import TOOLSET, WasmTools, split_name, tool_name

__all__ = [
    "TOOLSET",
    "BadArguments",
    "InstallRefused",
    "LimitExceeded",
    "Manifest",
    "ManifestError",
    "Package",
    "ToolChanged",
    "ToolFailed",
    "ToolNotInstalled",
    "ToolStore",
    "WasmError",
    "WasmTools",
    "describe",
    "parse_manifest",
    "read_package",
    "split_name",
    "tool_name",
]
