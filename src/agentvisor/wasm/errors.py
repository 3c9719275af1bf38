"""What the Wasm tool layer raises, under the project's `AgentvisorError`.

    AgentvisorError
    └── WasmError                    anything about a Wasm tool
        ├── ManifestError            a tool's manifest or module is invalid (install refused)
        ├── InstallRefused           the operator did not accept the capabilities
        ├── ToolNotInstalled         no installed tool or function by that name
        ├── ToolChanged              the installed files differ from the lock: reinstall
        ├── BadArguments             the call's arguments do not match the input schema
        └── ToolFailed               the call ran and failed: the tool said so, or it trapped
            └── LimitExceeded        the call hit its time, memory or output limit

Refusals on the network path (`NetworkBlocked`, `PolicyDenied`) are not raised to the
caller: the tool gets them as ``{"error": ..., "refused": true}`` and decides what to say.
"""

from __future__ import annotations

from ..errors import AgentvisorError


class WasmError(AgentvisorError):
    """Base class of the Wasm tool layer's errors."""


class ManifestError(WasmError):
    """A manifest or module cannot be installed or loaded; the message says why."""


class InstallRefused(WasmError):
    """The operator declined the capabilities, or nobody was there to accept them."""


class ToolNotInstalled(WasmError):
    """No installed Wasm tool (or no function of it) has that name."""


class ToolChanged(WasmError):
    """An installed module or manifest no longer matches its SHA-256 in the lock file."""


class BadArguments(WasmError):
    """A call's arguments are not a JSON object matching the function's input schema."""


class ToolFailed(WasmError):
    """The tool ran and failed: it returned an error, trapped, or broke the ABI."""


class LimitExceeded(ToolFailed):
    """The call ran past its time limit, memory limit or output limit and was stopped."""
