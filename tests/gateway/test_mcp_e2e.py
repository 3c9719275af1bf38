"""End to end through the official MCP SDK client, over stdio and over HTTP."""

from __future__ import annotations

import random
import subprocess
import time

import anyio
import httpx
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import AGENTVISOR, requires_bwrap
from tests.gateway.conftest import corpus_paths, serve, stdio_params, text

pytestmark = requires_bwrap


def background_job() -> str:
    """A sleep no other test runs (its length is unique), to find it from the host."""
    return f"sleep 299.{random.randrange(10**6):06d}"


def processes_of(job: str) -> list[str]:
    """Host pids of ``job`` still running (a session's sandbox is seen from the host)."""
    return subprocess.run(
        ["pgrep", "-f", f"^{job}$"], capture_output=True, text=True
    ).stdout.split()


def run(coro):
    return anyio.run(coro)


def test_stdio_tools_commands_and_files(gw_env):
    async def main():
        async with Client(stdio_params(gw_env, "--toolsets", "all")) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {
                "terminal",
                "process",
                "execute_code",
                "read_file",
                "write_file",
                "patch",
                "search_files",
                "web_extract",
                "web_search",
                "http_request",
            } <= names
            r = await c.call_tool("terminal", {"command": "echo hello; pwd"})
            assert "hello" in text(r) and str(gw_env["ws"]) in text(r) and "[exit 0" in text(r)
            r = await c.call_tool("terminal", {"command": "exit 3"})
            assert r.is_error and "[exit 3" in text(r)
            r = await c.call_tool("write_file", {"path": "a/b.txt", "content": "one\ntwo\n"})
            assert not r.is_error, text(r)
            assert (gw_env["ws"] / "a" / "b.txt").read_text() == "one\ntwo\n"
            r = await c.call_tool(
                "patch", {"path": "a/b.txt", "old_string": "two", "new_string": "2"}
            )
            assert not r.is_error, text(r)
            r = await c.call_tool("read_file", {"path": "a/b.txt"})
            assert "1|one" in text(r) and "2|2" in text(r)
            r = await c.call_tool(
                "patch", {"path": "a/b.txt", "old_string": "zzz", "new_string": "y"}
            )
            assert r.is_error and "not found" in text(r)
            r = await c.call_tool("search_files", {"pattern": "one"})
            assert "b.txt" in text(r)
            r = await c.call_tool("execute_code", {"code": "print(6 * 7)"})
            assert "42" in text(r)
            # Files in the scratch space persist between calls of one session.
            await c.call_tool("terminal", {"command": "echo kept > /tmp/state"})
            r = await c.call_tool("terminal", {"command": "cat /tmp/state"})
            assert "kept" in text(r)

    run(main)


def test_stdio_background_job_lifecycle(gw_env):
    async def main():
        async with Client(stdio_params(gw_env)) as c:
            r = await c.call_tool(
                "terminal",
                {"command": "for i in 1 2 3; do echo tick$i; sleep 0.2; done", "background": True},
            )
            assert "background job" in text(r)
            job = int(text(r).split("job ")[1].split()[0])
            r = await c.call_tool("process", {"action": "list"})
            assert str(job) in text(r)
            r = await c.call_tool("process", {"action": "wait", "job_id": job, "timeout": 10})
            assert "tick3" in text(r) and "exited with 0" in text(r)
            r = await c.call_tool("terminal", {"command": "sleep 300", "background": True})
            job = int(text(r).split("job ")[1].split()[0])
            r = await c.call_tool("process", {"action": "kill", "job_id": job})
            assert "killed" in text(r)
            r = await c.call_tool("process", {"action": "poll", "job_id": job})
            assert "exited" in text(r)

    run(main)


def test_toolsets_limit_what_is_listed_and_callable(gw_env):
    async def main():
        async with Client(stdio_params(gw_env, "--toolsets", "safe")) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"web_extract", "web_search"}
            r = await c.call_tool("terminal", {"command": "true"})
            assert r.is_error and "not available" in text(r)
            r = await c.call_tool("write_file", {"path": "x", "content": "y"})
            assert r.is_error and not (gw_env["ws"] / "x").exists()

    run(main)


def test_command_refused_by_the_hardline_says_why(gw_env):
    async def main():
        async with Client(stdio_params(gw_env)) as c:
            r = await c.call_tool("terminal", {"command": "rm -rf / --no-preserve-root"})
            assert r.is_error
            assert "Refused" in text(r) and "Why:" in text(r)

    run(main)


def test_unattended_ask_is_denied(gw_env):
    async def main():
        async with Client(stdio_params(gw_env)) as c:
            r = await c.call_tool("terminal", {"command": "sudo ls"})
            assert r.is_error and "Refused" in text(r)

    run(main)


def test_path_corpus_over_mcp(gw_env, shared_corpus):
    ws = gw_env["ws"]
    outside = ws.parent / "outside.txt"
    outside.write_text("OUTSIDE\n")
    (ws / "sub").mkdir()
    (ws / "link_etc").symlink_to("/etc")
    ssh = gw_env["home"] / ".ssh"
    ssh.mkdir()
    (ssh / "id_rsa").write_text("PRIVATE KEY\n")
    (ws / "link_key").symlink_to(ssh / "id_rsa")
    (ws / "sub" / "link_up").symlink_to("../..")
    (ws / ".env").write_text("API_KEY=sk-secret\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")

    async def main():
        async with Client(stdio_params(gw_env, "--toolsets", "file")) as c:
            for op, path in corpus_paths(shared_corpus):
                if op == "read":
                    r = await c.call_tool("read_file", {"path": path})
                    assert r.is_error, (op, path, text(r))
                    assert "PRIVATE KEY" not in text(r) and "sk-secret" not in text(r)
                    assert "root:" not in text(r) and "OUTSIDE" not in text(r)
                elif op == "write":
                    r = await c.call_tool("write_file", {"path": path, "content": "pwned\n"})
                    assert r.is_error, (op, path, text(r))
                else:
                    r = await c.call_tool(
                        "patch", {"path": path, "old_string": "O", "new_string": "X"}
                    )
                    assert r.is_error, (op, path, text(r))

    run(main)
    assert outside.read_text() == "OUTSIDE\n"
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert (ssh / "id_rsa").read_text() == "PRIVATE KEY\n"


def test_private_address_fetch_refused(gw_env):
    async def main():
        async with Client(stdio_params(gw_env, "--toolsets", "web")) as c:
            for url in (
                "http://127.0.0.1:9/",
                "http://169.254.169.254/latest/meta-data/",
                "http://[::1]/",
                "http://10.0.0.1/",
            ):
                r = await c.call_tool("web_extract", {"url": url})
                assert r.is_error, (url, text(r))

    run(main)


def _http_client(url: str, token: str | None = None) -> Client:
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(
        streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers)), mode="legacy"
    )


def test_http_sessions_are_isolated_and_end_with_the_session(gw_env):
    with serve(gw_env) as (url, _):
        job = background_job()

        async def main():
            async with _http_client(url) as a, _http_client(url) as b:
                await a.call_tool(
                    "terminal", {"command": f"echo mine > /tmp/a-only; {job} & echo started"}
                )
                r = await b.call_tool("terminal", {"command": "cat /tmp/a-only; ps -e"})
                assert "mine" not in text(r) and "sleep" not in text(r)
                r = await a.call_tool("terminal", {"command": "cat /tmp/a-only"})
                assert "mine" in text(r)
                assert processes_of(job)  # control: the probe sees the running sandbox
            # Both clients sent DELETE on exit: their sandboxes must be gone.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                left = processes_of(job)
                if not left:
                    break
                await anyio.sleep(0.2)
            assert left == []

        run(main)


def test_http_modern_protocol_named_sessions(gw_env):
    with serve(gw_env) as (url, _):

        async def main():
            async with Client(url + "?session=alpha") as a:
                await a.call_tool("terminal", {"command": "echo alpha > /tmp/who"})
            async with Client(url + "?session=alpha") as a2:
                r = await a2.call_tool("terminal", {"command": "cat /tmp/who"})
                assert "alpha" in text(r)

        run(main)


def test_non_loopback_needs_a_token(gw_env):
    r = subprocess.run(
        [
            AGENTVISOR,
            "serve",
            "--config",
            str(gw_env["config"]),
            "--host",
            "0.0.0.0",
            "--workspace",
            str(gw_env["ws"]),
        ],
        env=gw_env["env"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 125 and "token" in r.stderr


def test_token_is_required_when_set(gw_env):
    with serve(gw_env, "--token", "s3cret") as (url, _):
        assert httpx.post(url, json={}).status_code == 401

        async def main():
            async with _http_client(url, "s3cret") as c:
                assert (await c.list_tools()).tools

        run(main)


def test_stdio_sandbox_ends_with_the_session(gw_env):
    job = background_job()

    async def main():
        async with Client(stdio_params(gw_env)) as c:
            await c.call_tool("terminal", {"command": f"{job} & echo bg"})
            assert processes_of(job)  # control: the probe sees the running sandbox

    run(main)
    deadline = time.monotonic() + 10
    while processes_of(job) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_of(job) == []
