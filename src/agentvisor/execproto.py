"""The wire format between `agentvisor exec` and a gateway's exec server.

Kept in its own module with nothing but ``os`` imported: the CLI loads it on every start.
NUL-separated UTF-8 fields, because no argument, path or environment entry can contain
NUL — and neither side needs a JSON parser (json alone costs the CLI more than the rest
of its start). Over a SOCK_SEQPACKET Unix socket:

    client -> server   "agentvisor-exec-1" NUL cwd NUL N NUL arg1 .. argN NUL K=V ...
                       with fds 0, 1, 2 as SCM_RIGHTS
    server -> client   "S" + a line for stderr ..., then "E" + the exit status,
                       or "F" before anything ran: the client runs the command itself
    client -> server   "K" (Ctrl-C), or it closes the socket: either ends the run
"""

from __future__ import annotations

import os

PROTOCOL = "agentvisor-exec-1"


def socket_path(environ: os._Environ[str] | dict[str, str]) -> str:
    """``$XDG_RUNTIME_DIR/agentvisor/exec.sock``, else in agentvisor's state directory
    (as `agentvisor.paths.runtime_dir`, which imports pathlib; a test keeps them equal)."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "agentvisor", "exec.sock")
    state = environ.get("XDG_STATE_HOME", "")
    if not (state and os.path.isabs(state)):
        state = os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "agentvisor", "exec.sock")


def encode_request(args: list[str], cwd: str, env: dict[str, str]) -> bytes:
    fields = [PROTOCOL, cwd, str(len(args)), *args, *(f"{k}={v}" for k, v in env.items())]
    return "\0".join(fields).encode("utf-8", "surrogateescape")


def decode_request(data: bytes) -> tuple[list[str], str, dict[str, str]]:
    """(args, cwd, env); ValueError for anything else."""
    fields = data.decode("utf-8", "surrogateescape").split("\0")
    if fields[0] != PROTOCOL or len(fields) < 3:
        raise ValueError("not an agentvisor exec request")
    count = int(fields[2])
    args = fields[3 : 3 + count]
    env = dict(item.split("=", 1) for item in fields[3 + count :] if "=" in item)
    return args, fields[1], env


def message(kind: str, text: str) -> bytes:
    return (kind + text).encode("utf-8", "surrogateescape")
