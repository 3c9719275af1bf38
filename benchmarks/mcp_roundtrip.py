"""`terminal` running `true` through the official MCP client, in a persistent session, against
a raw bwrap run of `true` measured in the same run. Prints medians and the ratio.

Target (issue 5): <= 3x raw bwrap (srt adds ~40 ms per command on this class of machine).
The MCP server is `agentvisor mcp` over stdio, as an agent would start it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, str(Path(__file__).parent))
from _common import RAW_BWRAP

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
CLI = str(Path(sys.executable).with_name("agentvisor"))


def raw_bwrap(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(RAW_BWRAP, check=True)
        times.append(time.perf_counter() - start)
    return times


async def mcp_terminal(ws: str, runs: int) -> list[float]:
    params = StdioServerParameters(
        command=CLI,
        args=["mcp", "--workspace", ws, "--toolsets", "terminal"],
        env=dict(os.environ),
        cwd=ws,
    )
    times = []
    async with Client(params) as client:
        for _ in range(5):  # warm up: the session's sandbox starts on the first call
            await client.call_tool("terminal", {"command": "true"})
        for _ in range(runs):
            start = time.perf_counter()
            result = await client.call_tool("terminal", {"command": "true"})
            times.append(time.perf_counter() - start)
            assert not result.is_error, result
    return times


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="agentvisor-bench-") as ws:
        raw_bwrap(5)
        raw, mcp = [], []
        for _ in range(2):  # two rounds, side by side, so drift hits both
            raw += raw_bwrap(RUNS // 2)
            mcp += anyio.run(mcp_terminal, ws, RUNS // 2)
    raw_ms, mcp_ms = statistics.median(raw) * 1000, statistics.median(mcp) * 1000
    print(f"MCP round trip, {len(mcp)} calls (medians)")
    print(f"  raw bwrap true          {raw_ms:7.2f} ms   1.00x")
    print(f"  MCP terminal('true')    {mcp_ms:7.2f} ms   {mcp_ms / raw_ms:5.2f}x raw bwrap")


if __name__ == "__main__":
    main()
