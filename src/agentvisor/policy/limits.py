"""The analysis budget: how much work one command line may cost before the policy stops
and asks instead (issue 16). A command built to be expensive to analyse (variables that
double, substitutions nested a thousand deep, loops within loops) must not hang the
gateway nor crash it, and must not be allowed because the analysis gave up.

Over any limit `TooComplex` is raised; the analysis turns it into a note, and the note
into an ask (a deny when nobody can be asked) whose reason says what was too much.
"""

from __future__ import annotations

import time

# Nesting of statements, substitutions and quotes: far beyond anything written by hand,
# and well inside Python's recursion limit (each level costs a handful of frames).
MAX_NESTING = 64
# Statements walked, syntax nodes converted, and characters produced by expansion.
MAX_STEPS = 10_000
MAX_NODES = 10_000
MAX_EXPANDED_CHARS = 1024 * 1024
# Brace groups expanded one after another inside one word, and words they may make.
MAX_BRACE_GROUPS = 64
MAX_BRACE_WORDS = 1024
# Wall-clock time for parsing and analysing one command line, and for that plus the
# category checks on what the analysis found (the checks of one command may overrun it by
# one command's worth); the decision as a whole stays within 50 ms on a loaded machine.
MAX_SECONDS = 0.02
MAX_JUDGED_SECONDS = 0.03
SMALL = 256  # statements and parts below which the clock is not looked at
SMALL_SOURCE = 4096  # bytes below which tree-sitter is not halted


class TooComplex(Exception):
    """The command line is over the analysis budget; ``str(exc)`` says which part."""


class Budget:
    """What is left of the budget for one command line. Hand-written counters rather
    than a record: they change on every step of the walk."""

    __slots__ = ("chars", "deadline", "nesting", "nodes", "seconds", "steps", "ticks")

    def __init__(self, seconds: float = MAX_SECONDS) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.steps = 0
        self.nodes = 0
        self.chars = 0
        self.nesting = 0
        self.ticks = 0

    def step(self) -> None:
        """One statement walked."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TooComplex(f"it would run more than {MAX_STEPS} statements")
        self._clock()

    def node(self) -> None:
        """One syntax node converted."""
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise TooComplex(f"it has more than {MAX_NODES} parts")
        if not self.nodes & 63:
            self._clock()

    def tick(self) -> None:
        """One small piece of work in a loop that nothing else counts (a word's parts, a
        syntax node within a word): looks at the clock now and then, counts no limit."""
        self.ticks += 1
        if not self.ticks & 63 and self.ticks > SMALL and time.monotonic() > self.deadline:
            raise TooComplex(f"analysing it takes longer than {self.seconds * 1000:.0f} ms")

    def spend(self, units: int) -> None:
        """``units`` of work about to be done at once (the words of a command the checks
        are about to judge): looks at the clock once the work is no longer small."""
        self.ticks += units
        if self.ticks > SMALL and time.monotonic() > self.deadline:
            raise TooComplex(
                f"analysing and judging it take longer than {MAX_JUDGED_SECONDS * 1000:.0f} ms"
            )

    def expanded(self, chars: int) -> None:
        """``chars`` characters made by expanding a word."""
        self.chars += chars
        if self.chars > MAX_EXPANDED_CHARS:
            raise TooComplex(f"its expansions grow beyond {MAX_EXPANDED_CHARS // 1024 // 1024} MiB")

    def enter(self) -> None:
        """One level deeper (a body, a substitution, a nested shell)."""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise TooComplex(f"it is nested more than {MAX_NESTING} levels deep")

    def leave(self) -> None:
        self.nesting -= 1

    def _clock(self) -> None:
        # A small command is never stopped by the clock: a pause of the machine (load, a
        # garbage collection) must not turn `ls` into an ask.
        if self.steps + self.nodes > SMALL and time.monotonic() > self.deadline:
            raise TooComplex(f"analysing it takes longer than {self.seconds * 1000:.0f} ms")
