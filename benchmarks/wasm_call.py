"""Overhead of a trivial Wasm tool call against a trivial built-in call, in the same run.

Two pairs, interleaved run by run, medians and ratios printed:
- Python API: `WasmTools.call("jsonlint", "validate", {"text": "[]"})` (argument check,
  fresh store and instance, WASI setup, the call, result read and redacted) against the
  same job as a plain Python function (`json.loads` with the same argument check);
- gateway: `Gateway.call(session, "wasm_jsonlint_validate", ...)` against the built-in
  `process` tool listing no jobs, both through the whole pipeline (session, schema,
  policy, result shaping, one audit event each).

Needs the example tools built (`make wasm-examples`, part of `make install`). The tool
is installed into a temporary state directory; nothing of the operator's is touched.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved, median_ms

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wasm" / "jsonlint"


def python_validate(validator: Any, text: str) -> dict:
    """The built-in equivalent: the same argument check, then json.loads."""
    from agentvisor.wasm.tools import argument_problem

    assert argument_problem(validator, {"text": text}) is None
    try:
        json.loads(text)
    except ValueError as exc:
        return {"valid": False, "problem": str(exc)}
    return {"valid": True}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="agentvisor-bench-") as tmp:
        # Before anything reads the XDG variables: state, config and cache go to tmp.
        for var in ("XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            os.environ[var] = str(Path(tmp) / var.lower())
        import jsonschema

        from agentvisor.config import config_from_dict
        from agentvisor.wasm import ToolStore, WasmTools, read_package
        from agentvisor.wasm.runtime import Runtime

        package = read_package(EXAMPLE)
        Runtime.shared().compile(package.manifest, package.module_bytes)
        ToolStore().install(package)
        config = config_from_dict(
            {
                "rules": [{"decision": "allow", "kind": "tool", "pattern": "wasm_*"}],
                "toolsets": ["terminal", "wasm"],
            }
        )
        tools = WasmTools.load(config)
        schema = package.manifest.functions[0].input_schema
        validator = jsonschema.Draft202012Validator(schema)
        api = interleaved(
            {
                "Python function": lambda: python_validate(validator, "[]"),
                "Wasm tool": lambda: tools.call("jsonlint", "validate", {"text": "[]"}),
            },
            RUNS,
        )
        report("Python API", api, "Python function", "Wasm tool")

        gateway_cases = gateway_pair(config, Path(tmp) / "ws")
        if gateway_cases is not None:
            report(
                "gateway pipeline",
                interleaved(gateway_cases, RUNS),
                "built-in process list",
                "wasm_jsonlint_validate",
            )


def gateway_pair(config: Any, ws: Path) -> dict | None:
    from agentvisor.errors import SandboxUnavailable
    from agentvisor.gateway import Gateway
    from agentvisor.wasm.gateway import tool_specs

    ws.mkdir()
    try:
        gateway = Gateway(config, workspace=ws, extra_tools=tool_specs)
    except SandboxUnavailable as exc:
        print(f"gateway pipeline: skipped ({exc})")
        return None
    session = gateway.open_session(agent="bench")

    def builtin() -> None:
        assert not gateway.call(session, "process", {"action": "list"}).is_error

    def wasm() -> None:
        out = gateway.call(session, "wasm_jsonlint_validate", {"text": "[]"})
        assert not out.is_error, out.text

    return {"built-in process list": builtin, "wasm_jsonlint_validate": wasm}


def report(title: str, results: dict[str, list[float]], base: str, other: str) -> None:
    b, o = median_ms(results[base]), median_ms(results[other])
    print(f"{title} ({len(results[base])} runs each, interleaved)")
    print(f"  {base:<24} median {b:8.3f} ms")
    print(f"  {other:<24} median {o:8.3f} ms   {o / b:6.1f}x, {o - b:+.3f} ms per call")


if __name__ == "__main__":
    main()
