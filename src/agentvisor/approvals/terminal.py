"""The terminal channel: asks the person at agentvisor's own terminal.

It is available only when standard input is a terminal: a piped stdin, a cron job or a
service has no person behind it, and the broker then denies (``approvals.unattended``).
The prompt shows the action, the pieces of a command that made the policy ask, the rule
or category, and the session. Answers, those the ask offers (`ApprovalRequest.choices`):
[o]nce, [s]ession, [a]lways (pick a config file, see the rule, confirm), [d]eny (with a
reason the agent sees).
"""

from __future__ import annotations

import os
import select
import sys
import threading
from typing import TYPE_CHECKING, TextIO

from ..state.asks import Answer, ApprovalRequest, render

if TYPE_CHECKING:
    from ..state.asks import SubmitFn

_POLL = 0.1


class TerminalChannel:
    name = "terminal"
    where = "the gateway's terminal"

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.out = stdout or sys.stderr
        self._cancelled: dict[int, str] = {}
        self._lock = threading.Lock()

    def available(self) -> bool:
        try:
            return self.stdin.isatty()
        except (AttributeError, ValueError, OSError):
            return False

    def ask(self, request: ApprovalRequest, submit: SubmitFn) -> None:
        thread = threading.Thread(
            target=self._run,
            args=(request, submit),
            daemon=True,
            name=f"approval-terminal-{request.id}",
        )
        thread.start()

    def cancel(self, request: ApprovalRequest, outcome: str) -> None:
        with self._lock:
            first = request.id not in self._cancelled
            self._cancelled[request.id] = outcome
        if first:
            self._print(f"\n  ({outcome})\n")

    # --- the conversation -------------------------------------------------------------

    def _run(self, request: ApprovalRequest, submit: SubmitFn) -> None:
        self._print(render(request))
        choices = request.choices
        keys = "/".join(f"[{c[0]}]{c[1:]}" for c in choices)
        while True:
            line = self._ask_line(request, f"  allow? {keys} > ")
            if line is None:
                return
            key = line.strip().lower()[:1]
            choice = next((c for c in choices if c[0] == key), None)
            if choice is None:
                self._print(f"  please answer {keys}\n")
                continue
            if choice == "deny":
                reason = self._ask_line(request, "  reason (shown to the agent, optional) > ")
                if reason is None:
                    return
                submit(Answer("deny", self.name, _who(), reason.strip()))
                return
            if choice == "always":
                path = self._pick_file(request)
                if path is None:
                    continue
                submit(Answer("always", self.name, _who(), config_file=path))
                return
            submit(Answer(choice, self.name, _who()))
            return

    def _pick_file(self, request: ApprovalRequest) -> str | None:
        from .rulefile import rule_entries

        files = request.config_files
        for index, path in enumerate(files, 1):
            self._print(f"    {index}) {path}\n")
        line = self._ask_line(request, "  write the rule to which file? [1] > ")
        if line is None:
            return None
        pick = line.strip() or "1"
        if not pick.isdigit() or not 1 <= int(pick) <= len(files):
            self._print("  no such file\n")
            return None
        path = files[int(pick) - 1]
        self._print(f"  this will be added to {path}:\n\n")
        for entry in rule_entries(request):
            self._print("    " + entry.replace("\n", "\n    ") + "\n")
        confirm = self._ask_line(request, "\n  save it? [y/N] > ")
        if confirm is None or confirm.strip().lower() not in ("y", "yes"):
            return None
        return path

    def _ask_line(self, request: ApprovalRequest, prompt: str) -> str | None:
        """A line from the person, or None once the request is settled elsewhere."""
        self._print(prompt)
        fd = self.stdin.fileno()
        buf = b""
        while True:
            with self._lock:
                if request.id in self._cancelled:
                    return None
            ready, _, _ = select.select([fd], [], [], _POLL)
            if not ready:
                continue
            chunk = os.read(fd, 1024)
            if not chunk:
                return None
            buf += chunk
            if b"\n" in buf:
                return buf.split(b"\n", 1)[0].decode("utf-8", "replace")

    def _print(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            pass


def _who() -> str:
    try:
        return f"{os.getlogin()} (terminal)"
    except OSError:
        return "a person at the terminal"
