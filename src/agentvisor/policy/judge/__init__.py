"""Judging: which categories what a command would do falls in, and why.

The checks are declared as data, `CHECKS`: each names the programs it is about (or
none: every command) and a function that yields `Finding`s; `Judge.invocation` runs the
ones that apply in one loop, in order. A check for a new program family is a row here
and a function in the module of its family:

- `code`: programs and code only known at run time, downloads and decoded payloads;
- `destroy`: deletes, device wipes, permissions of system directories;
- `system`: power, kill-all, privilege, things that run later;
- `vcs`: git; `network`: uploads, remote shells and copies, addresses;
- `ops`: container engines, clusters, clouds and databases, outside the sandbox;
- `scope`: one path or host, and the paths a command reads and writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from ...records import Declared
from .. import knowledge
from ..categories import CATEGORIES
from ..facts import Invocation, Note
from . import code, destroy, network, ops, system, vcs
from .findings import Finding, dedupe, short
from .scope import Scope

__all__ = ["CHECKS", "Check", "Finding", "Judge"]

CheckFn = Callable[[Scope, Invocation, str], Iterable[Finding]]


class Check(Declared):
    """One check: ``run`` applies to the commands whose program is in ``programs``, or
    matches ``pattern``, or to every command when neither is given."""

    run: CheckFn
    programs: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None

    def applies(self, program: str | None) -> bool:
        if self.programs is None and self.pattern is None:
            return True
        if not program:
            return False
        if self.programs is not None and program in self.programs:
            return True
        return self.pattern is not None and bool(self.pattern.match(program))


def _files(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    for path in scope.reads(inv):
        yield from scope.read_path(path)
    for path in scope.writes(inv):
        yield from scope.write_path(path, piece)


def _on(*programs: str) -> frozenset[str]:
    return frozenset(programs)


CHECKS: tuple[Check, ...] = (
    Check(code.unknown_program),
    Check(code.runs_code),
    Check(code.inline_code),
    Check(destroy.delete, _on("rm", "find", "mv", "rsync")),
    Check(destroy.disk, pattern=knowledge.DISK_WRITERS),
    Check(destroy.chmod, _on("chmod", "chown", "chgrp")),
    Check(destroy.tracks, knowledge.DELETERS | frozenset(knowledge.TRACK_COMMANDS)),
    Check(destroy.device_writes),
    Check(system.power, _on("shutdown", "reboot", "poweroff", "halt")),
    Check(system.systemctl, _on("systemctl")),
    Check(system.init, _on("init", "telinit")),
    Check(system.loginctl, _on("loginctl")),
    Check(system.kill, _on("kill", "pkill", "killall5")),
    Check(system.privilege, knowledge.PRIVILEGE),
    Check(system.agentvisor, _on("agentvisor")),
    Check(system.crontab, _on("crontab")),
    Check(
        system.schedule,
        _on(
            *("at", "batch", "launchctl", "update-rc.d", "chkconfig", "rc-update"),
            *("useradd", "adduser", "usermod", "passwd", "chpasswd", "visudo"),
        ),
    ),
    Check(system.systemd_run, _on("systemd-run")),
    Check(vcs.git, _on("git")),
    Check(network.http_upload, _on("curl", "wget", "http", "https", "xh", "httpie")),
    Check(network.remote_copy, _on("scp", "rsync", "sftp", "rclone")),
    Check(network.sender, knowledge.NET_SENDERS),
    Check(network.inline_exfil),
    Check(network.secrets_in_urls, knowledge.URL_CLIENTS),
    Check(ops.destroys, frozenset(knowledge.OPS) | frozenset(knowledge.OPS_DESTROY_FLAGS)),
    Check(ops.queries, frozenset(knowledge.QUERY_OPTS)),
    Check(ops.host_containers, frozenset({"docker", "podman", "nerdctl"})),
    Check(_files),
    Check(network.dev_tcp),
    Check(network.destinations, knowledge.NET_CLIENTS),
)


_BY_PROGRAM: dict[str | None, tuple[Check, ...]] = {}


def _checks_for(program: str | None) -> tuple[Check, ...]:
    """The checks that apply to ``program``, in order (worked out once per program)."""
    checks = _BY_PROGRAM.get(program)
    if checks is None:
        checks = tuple(c for c in CHECKS if c.applies(program))
        if len(_BY_PROGRAM) < 4096:
            _BY_PROGRAM[program] = checks
    return checks


class Judge:
    """Applies the enabled categories to commands, paths and hosts."""

    def __init__(self, home: str, enabled: Iterable[str] | None = None) -> None:
        self.scope = Scope(home)
        self.home = self.scope.home
        self.enabled = frozenset(CATEGORIES if enabled is None else enabled)

    def _enabled(self, findings: Iterable[Finding]) -> list[Finding]:
        return [f for f in findings if f.category in self.enabled or f.tag == code.ALWAYS]

    def invocation(self, inv: Invocation) -> list[Finding]:
        piece = short(inv.text)
        found = (
            finding
            for check in _checks_for(inv.program)
            for finding in check.run(self.scope, inv, piece)
        )
        return dedupe(self._enabled(found))

    def notes(self, notes: list[Note]) -> list[Finding]:
        return self._enabled(f for n in notes for f in code.note_findings(n))

    def read_path(self, path: str) -> list[Finding]:
        return self._enabled(self.scope.read_path(path))

    def write_path(self, path: str, piece: str = "") -> list[Finding]:
        return self._enabled(self.scope.write_path(path, piece))

    def fetch_host(self, host: str, piece: str) -> list[Finding]:
        return self._enabled(self.scope.fetch_host(host, piece))

    def reads(self, inv: Invocation) -> list[str]:
        return self.scope.reads(inv)

    def writes(self, inv: Invocation) -> list[str]:
        return self.scope.writes(inv)
