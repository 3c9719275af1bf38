"""One AgentDojo suite served as a stdio MCP server: the upstream of agentdojo_replay.py.

    python _agentdojo_adapter.py SUITE      (AgentDojo benchmark v1.2.2)

Each of the suite's tools is an MCP tool with AgentDojo's own description and JSON schema;
a call runs AgentDojo's function on the current environment and answers with AgentDojo's
own text for the result (YAML, as its agents see it). Two control tools, never offered to
the agent (the replay's config denies them), let the replay drive the run:

- ``agentdojo_reset {injections}``: a fresh environment with these injections placed;
- ``agentdojo_security {injection_task}``: AgentDojo's security check of that injection
  task on the environment as the calls left it (true = the attack reached its goal).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from mcp.server import Server
from mcp.server.stdio import stdio_server

BENCHMARK_VERSION = "v1.2.2"
RESET = "agentdojo_reset"
SECURITY = "agentdojo_security"


class SuiteState:
    def __init__(self, name: str) -> None:
        self.suite = get_suite(BENCHMARK_VERSION, name)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.pre: Any = None
        self.env: Any = None
        self.calls: list[Any] = []

    def reset(self, injections: dict[str, str]) -> str:
        self.pre = self.suite.load_and_inject_default_environment(injections)
        self.env = self.pre.model_copy(deep=True)
        self.calls = []
        return "ok"

    def security(self, injection_task: str) -> str:
        # Some tasks judge by the calls made (a user invited, then removed again).
        task = self.suite.get_injection_task_by_id(injection_task)
        verdict = task.security_from_traces("", self.pre, self.env, self.calls)
        if verdict is None:
            verdict = task.security("", self.pre, self.env)
        return json.dumps(bool(verdict))

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        self.calls.append(FunctionCall(function=name, args=arguments))
        result, error = self.runtime.run_function(self.env, name, arguments)
        if error:
            return error, True
        return tool_result_to_str(result), False

    def tools(self) -> list[types.Tool]:
        tools = [
            types.Tool(
                name=f.name,
                description=f.description,
                input_schema=f.parameters.model_json_schema(),
            )
            for f in self.suite.tools
        ]
        control = {"type": "object", "additionalProperties": True}
        tools.append(types.Tool(name=RESET, description="replay control", input_schema=control))
        tools.append(types.Tool(name=SECURITY, description="replay control", input_schema=control))
        return tools


def main() -> None:
    state = SuiteState(sys.argv[1])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=state.tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name == RESET:
            text, is_error = state.reset(arguments.get("injections") or {}), False
        elif params.name == SECURITY:
            text, is_error = state.security(arguments["injection_task"]), False
        else:
            text, is_error = state.call(params.name, arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    server = Server("agentdojo-" + sys.argv[1], on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
