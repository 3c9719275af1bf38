"""terminal, process and execute_code: commands in the session's sandbox."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from ...actions import Action
from ..results import ToolOutput
from . import ToolSpec, schema

if TYPE_CHECKING:
    from ..session import Session

SHELL = "/bin/bash"


def _command_actions(session: Session, args: dict[str, Any]) -> list[Action]:
    return [Action("exec", args["command"])]


def _format(result_text: str, exit_code: int, duration: float, timed_out: bool) -> str:
    status = (
        f"[timed out after {duration:.1f} s; the command was killed]"
        if timed_out
        else f"[exit {exit_code} in {duration:.2f} s]"
    )
    return f"{result_text.rstrip()}\n{status}".lstrip("\n")


def run_terminal(session: Session, args: dict[str, Any]) -> ToolOutput:
    argv = [SHELL, "-c", args["command"]]
    if args.get("background"):
        job = session.start_background(argv, cwd=args.get("workdir"))
        return ToolOutput(
            f"started background job {job.id} (pid {job.pid}); use the process "
            f"tool to poll its output or kill it",
            data={"job": job.id},
        )
    result = session.run(argv, cwd=args.get("workdir"), timeout=args.get("timeout"))
    text = result.stdout.decode(errors="replace")
    if result.stderr:
        text += ("\n" if text and not text.endswith("\n") else "") + result.stderr.decode(
            errors="replace"
        )
    return ToolOutput(
        _format(text, result.exit_code, result.duration, result.timed_out),
        is_error=result.exit_code != 0,
        data={
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "duration": round(result.duration, 3),
        },
    )


def run_process(session: Session, args: dict[str, Any]) -> ToolOutput:
    action = args["action"]
    if action == "list":
        jobs = session.jobs()
        if not jobs:
            return ToolOutput("no background jobs")
        lines = [
            f"{j.id}\t{'running' if j.running else f'exit {j.status}'}\t"
            f"{shlex.join(j.argv[2:] if j.argv[:2] == [SHELL, '-c'] else j.argv)}"
            for j in jobs
        ]
        return ToolOutput("id\tstate\tcommand\n" + "\n".join(lines))
    job = session.job(args.get("job_id"))
    if job is None:
        return ToolOutput(
            f"no background job {args.get('job_id')} in this session (process list shows them)",
            is_error=True,
        )
    if action == "kill":
        session.kill(job)
        job.wait(5)
        return ToolOutput(f"job {job.id} killed")
    if action == "wait":
        job.wait(float(args.get("timeout") or 30))
    new = job.stdout.take_new() + job.stderr.take_new()
    state = "running" if job.running else f"exited with {job.status}"
    return ToolOutput(
        f"{new.decode(errors='replace')}\n[job {job.id} {state}]".lstrip("\n"),
        data={"running": job.running, "exit_code": job.status},
    )


def _code_actions(session: Session, args: dict[str, Any]) -> list[Action]:
    argv = ("python3", "-c", args["code"])
    return [Action("exec", shlex.join(argv), argv=argv)]


def run_code(session: Session, args: dict[str, Any]) -> ToolOutput:
    result = session.run(["python3", "-"], stdin=args["code"].encode(), timeout=args.get("timeout"))
    text = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
    return ToolOutput(
        _format(text, result.exit_code, result.duration, result.timed_out),
        is_error=result.exit_code != 0,
        data={"exit_code": result.exit_code},
    )


TIMEOUT = {
    "type": "number",
    "exclusiveMinimum": 0,
    "description": "Seconds before the command is killed (default and most: sandbox.timeout).",
}

TOOLS = [
    ToolSpec(
        name="terminal",
        description="Run a shell command (bash) in this session's sandbox: no network, no "
        "secrets, writes only in the workspace, /tmp and home. The working directory is the "
        "workspace. Files in /tmp and background jobs persist between calls. Output is capped; "
        "the exit status is reported.",
        input_schema=schema(
            {
                "command": {"type": "string", "description": "The command line, e.g. 'ls -la'."},
                "timeout": TIMEOUT,
                "background": {
                    "type": "boolean",
                    "description": "Start it and return at once; "
                    "follow it with the process tool (for servers, long builds).",
                },
                "workdir": {
                    "type": "string",
                    "description": "Directory to run in (default: the workspace).",
                },
            },
            ["command"],
        ),
        toolsets=frozenset({"terminal"}),
        actions=_command_actions,
        run=run_terminal,
    ),
    ToolSpec(
        name="process",
        description="Manage background jobs started with terminal(background=true): 'list' "
        "them, 'poll' new output, 'wait' for one to end, or 'kill' it.",
        input_schema=schema(
            {
                "action": {"type": "string", "enum": ["list", "poll", "wait", "kill"]},
                "job_id": {"type": "integer", "description": "The job id terminal returned."},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "For 'wait': seconds to wait (default 30).",
                },
            },
            ["action"],
        ),
        toolsets=frozenset({"terminal"}),
        actions=lambda session, args: [],
        run=run_process,
    ),
    ToolSpec(
        name="execute_code",
        description="Run a Python 3 program in this session's sandbox (same isolation as "
        "terminal) and return what it prints.",
        input_schema=schema(
            {
                "code": {"type": "string", "description": "The Python source to run."},
                "timeout": TIMEOUT,
            },
            ["code"],
        ),
        toolsets=frozenset({"terminal"}),
        actions=_code_actions,
        run=run_code,
    ),
]
