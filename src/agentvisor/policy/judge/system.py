"""Checks on the machine as a whole: power, killing every process, running as another
user, and making something run later (services, schedulers, accounts)."""

from __future__ import annotations

from collections.abc import Iterator

from .. import knowledge
from ..facts import Invocation
from .findings import Finding, operands
from .scope import Scope

_SERVICE_LATER = frozenset(
    {"enable", "link", "edit", "set-default", "preset", "reenable", "add-wants", "add-requires"}
)


def power(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    args = [a.text for a in inv.argv[1:]]
    if any(a in ("--help", "-h", "--version") for a in args) and inv.program != "shutdown":
        return
    if "--help" in args:
        return
    yield Finding("power", "deny", f"`{piece}` shuts down or restarts the machine", piece)


def systemctl(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    ops = [a.text for a in operands(inv.argv[1:])]
    verb = ops[0] if ops else ""
    if verb in knowledge.POWER_VERBS:
        yield from power(scope, inv, piece)
    elif verb in _SERVICE_LATER:
        yield Finding("persistence", "ask", f"`{piece}` makes a service start later", piece)


def init(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    if any(a.text in knowledge.POWER_RUNLEVELS for a in inv.argv[1:]):
        yield from power(scope, inv, piece)


def loginctl(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    if any(a.text in knowledge.POWER_VERBS for a in inv.argv[1:]):
        yield from power(scope, inv, piece)


def kill(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    if inv.program == "killall5":
        yield Finding("kill_all", "deny", f"`{piece}` signals every process", piece)
        return
    if "-1" in _kill_pids([a.text for a in inv.argv[1:]]):
        reason = f"`{piece}` signals every process the user can reach (pid -1)"
        yield Finding("kill_all", "deny", reason, piece)


def _kill_pids(args: list[str]) -> list[str]:
    if args == ["-1"]:
        return ["-1"]
    pids = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pids.extend(args[i + 1 :])
            break
        if a in ("-s", "-n", "--signal"):
            i += 2
            continue
        if a.startswith("-") and i == 0 and (a != "-1" or len(args) > 1):
            i += 1  # a signal; kill -1 PID: -1 is the signal (SIGHUP)
            continue
        pids.append(a)
        i += 1
    return pids


def privilege(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    spec = knowledge.WRAPPERS.get(inv.program or "")
    if spec and inv.argv[1:] and all(a.text in spec.no_command_opts for a in inv.argv[1:]):
        return  # sudo -l, sudo -v: nothing runs
    yield Finding("privilege", "ask", f"`{piece}` runs as another user ({inv.program})", piece)


def agentvisor(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    ops = [a.text for a in operands(inv.argv[1:])]
    if ops and ops[0] in ("grant", "revoke"):
        yield Finding("privilege", "ask", f"`{piece}` changes agentvisor's own grants", piece)


def crontab(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    texts = [a.text for a in inv.argv[1:]]
    if any(t in ("-l", "-r", "-ir", "-ri") for t in texts) and "-e" not in texts:
        return
    yield Finding("persistence", "ask", f"`{piece}` installs a crontab", piece)


def schedule(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    texts = [a.text for a in inv.argv[1:]]
    if inv.program in ("at", "batch") and any(t in ("-l", "-r", "-d", "-c") for t in texts):
        return
    reason = f"`{piece}` schedules or installs something that runs later"
    yield Finding("persistence", "ask", reason, piece)


def systemd_run(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    if any(a.text.startswith(("--on-", "--timer")) for a in inv.argv[1:]):
        yield Finding("persistence", "ask", f"`{piece}` sets a timer that runs later", piece)
