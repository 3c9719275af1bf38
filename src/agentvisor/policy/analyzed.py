"""Commands after analysis and category checks, cached per command and workspace: the
steady state of a session decides on commands it has seen before."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ..actions import Action
from ..records import Declared

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .facts import Invocation
    from .judge import Finding, Judge

    SandboxShows = Callable[[str, str], bool]

_CACHE_SIZE = 4096


class Analyzed(Declared):
    """One exec: per simple command its findings and the paths it reads and writes,
    and the findings about the command line as a whole."""

    pieces: tuple[tuple[Invocation, tuple[Finding, ...], tuple[str, ...], tuple[str, ...]], ...]
    notes: tuple[Finding, ...]


class AnalysisCache:
    """Analyses commands with `judge` and keeps the last `_CACHE_SIZE` results.
    ``sandbox_shows(path, workspace)``: whether the isolating sandbox that runs the
    commands can see ``path`` at all (None: commands run unisolated)."""

    def __init__(self, judge: Judge, sandbox_shows: SandboxShows | None) -> None:
        self.judge = judge
        self.sandbox_shows = sandbox_shows
        self._cache: OrderedDict[tuple[Any, ...], Analyzed] = OrderedDict()
        self._lock = threading.Lock()  # the gateway decides from several threads

    def get(self, action: Action, workspace: str) -> Analyzed:
        key = (action.argv, action.target, workspace)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        result = self._analyze(action, workspace)
        with self._lock:
            self._cache[key] = result
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return result

    def _analyze(self, action: Action, workspace: str) -> Analyzed:
        from .analysis import analyze_argv, analyze_source
        from .facts import Note
        from .limits import MAX_JUDGED_SECONDS, Budget, TooComplex

        home = self.judge.home
        started = time.monotonic()
        if action.argv is not None:
            analysis = analyze_argv(action.argv, workspace, home)
        else:
            analysis = analyze_source(action.target, workspace, home)
        judge = self.judge
        # The checks have a budget too, what the analysis left of MAX_JUDGED_SECONDS: ten
        # wrappers around a command of 1,000 words are ten commands of 1,000 words to
        # judge. What is left unjudged asks.
        budget = Budget(max(0.0, MAX_JUDGED_SECONDS - (time.monotonic() - started)))
        pieces = []
        for inv in analysis.invocations:
            try:
                budget.spend(len(inv.argv) + len(inv.redirects))
            except TooComplex as exc:
                analysis.notes.append(Note("too_complex", str(exc)))
                break
            pieces.append(
                (
                    inv,
                    self._reachable(inv, judge.invocation(inv), workspace),
                    tuple(judge.reads(inv)),
                    tuple(judge.writes(inv)),
                )
            )
        return Analyzed(tuple(pieces), tuple(judge.notes(analysis.notes)))

    def _reachable(
        self, inv: Invocation, findings: list[Finding], workspace: str
    ) -> tuple[Finding, ...]:
        """A script's arguments are its own data: whether ``python3 ./probe.py ~/.ssh/key``
        reads the key is unknowable. When the sandbox cannot even see that file, the read
        would fail inside, so such a finding is dropped. A tool that is known to read its
        operands (``cat ~/.ssh/key``) still asks: its intent is plain."""
        shows = self.sandbox_shows
        if shows is None or not _runs_script_file(inv):
            return tuple(findings)
        return tuple(
            f for f in findings if f.category != "credentials" or shows(f.piece, workspace)
        )


def _runs_script_file(inv: Invocation) -> bool:
    """A program from the workspace (``./tool``), or a shell or interpreter running a script
    file rather than inline code: its arguments mean what the script makes of them."""
    from . import knowledge

    if not inv.program or not inv.argv:
        return False
    head = inv.argv[0].text
    if "/" in head and not head.startswith(("/usr/", "/bin/", "/sbin/", "/opt/", "/etc/")):
        return True
    if inv.runs_code is not None and inv.runs_code.kind != "file":
        return False  # -c / -e code, or a shell fed on stdin: analysed as code instead
    known = inv.program in knowledge.SHELLS or knowledge.interpreter(inv.program) is not None
    return known and any(not a.text.startswith("-") for a in inv.argv[1:])
