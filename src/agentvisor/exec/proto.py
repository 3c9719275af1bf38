"""The wire format between `agentvisor exec` and an exec server (a gateway's or the helper's).

Kept to ``os`` and the request record: the CLI loads it on every start. NUL-separated
UTF-8 fields, because no argument, path or environment entry can contain NUL — and
neither side needs a JSON parser (json alone costs the CLI more than the rest of its
start). Over a SOCK_SEQPACKET Unix socket:

    client -> server   "agentvisor-exec-2" NUL cwd NUL config NUL workspace NUL timeout
                       NUL network NUL backend NUL dry-run NUL raw-output
                       NUL N NUL arg1 .. argN NUL K=V ...
                       with fds 0, 1, 2 as SCM_RIGHTS; an option is "=" + its value, or
                       empty when not given; a flag is "0" or "1"
    server -> client   "S" + a line for stderr ..., then "E" + the exit status,
                       or "F" before anything ran: the client runs the command itself
    client -> server   "K" (Ctrl-C), or it closes the socket: either ends the run
"""

from __future__ import annotations

import os

from .request import ExecRequest

PROTOCOL = "agentvisor-exec-2"
_OPTIONS = ("config", "workspace", "timeout", "network", "backend")
_FLAGS = ("dry_run", "raw_output")
_CHOICES = {"network": ("none", "proxy"), "backend": ("bwrap", "docker", "local")}


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


def encode_request(request: ExecRequest) -> bytes:
    fields = [
        PROTOCOL,
        request.cwd,
        *(_option(getattr(request, name)) for name in _OPTIONS),
        *("1" if getattr(request, name) else "0" for name in _FLAGS),
        str(len(request.argv)),
        *request.argv,
        *(f"{k}={v}" for k, v in request.environ.items()),
    ]
    return "\0".join(fields).encode("utf-8", "surrogateescape")


def decode_request(data: bytes) -> ExecRequest:
    """The request; ValueError for anything else (another version's client included)."""
    fields = data.decode("utf-8", "surrogateescape").split("\0")
    count_at = 2 + len(_OPTIONS) + len(_FLAGS)
    if fields[0] != PROTOCOL or len(fields) <= count_at:
        raise ValueError("not an agentvisor exec request")
    options: dict[str, str | None] = {}
    for name, field in zip(_OPTIONS, fields[2:], strict=False):
        if field and not field.startswith("="):
            raise ValueError(f"malformed option {name}")
        value = field[1:] if field else None
        if value is not None and name in _CHOICES and value not in _CHOICES[name]:
            raise ValueError(f"{name}: unknown value {value!r}")
        options[name] = value
    flags = fields[2 + len(_OPTIONS) : count_at]
    if not set(flags) <= {"0", "1"}:
        raise ValueError("malformed flags")
    count = int(fields[count_at])
    argv = fields[count_at + 1 : count_at + 1 + count]
    if len(argv) != count:
        raise ValueError("the request ends inside its arguments")
    env = dict(item.split("=", 1) for item in fields[count_at + 1 + count :] if "=" in item)
    timeout = options["timeout"]
    return ExecRequest(
        argv=tuple(argv),
        cwd=fields[1],
        environ=env,
        config=options["config"],
        workspace=options["workspace"],
        timeout=None if timeout is None else float(timeout),
        network=options["network"],
        backend=options["backend"],
        dry_run=flags[0] == "1",
        raw_output=flags[1] == "1",
    )


def message(kind: str, text: str) -> bytes:
    return (kind + text).encode("utf-8", "surrogateescape")


def _option(value: object) -> str:
    return "" if value is None else f"={value}"
