"""agentvisor's own adversarial set (issue 19), `adversarial.tsv`: commands written to slip
past static analysis, in classes (programs that run an argument as a command, shell
corners, home and system wipes, exfiltration by code and URL, ops tools outside the
sandbox), and benign look-alikes of each class that must stay allowed (false positives:
numbers read as addresses, editors, archivers, queries that only read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentvisor.actions import Action

from .conftest import ctx

ROWS = [
    (cols[0], cols[1], cols[-1].replace("\\n", "\n"))
    for line in Path(__file__).with_name("adversarial.tsv").read_text("utf-8").splitlines()
    if line.strip() and not line.startswith("#")
    for cols in [line.split("\t")]
]


def test_the_set_is_large_and_covers_every_class() -> None:
    assert len(ROWS) >= 150
    classes = {c.split(":")[0] for _, c, _ in ROWS}
    assert classes == {"runs-arg", "shell", "home", "exfil", "ops", "fp"}
    assert sum(1 for e, _, _ in ROWS if e == "allow") >= 30  # controls


@pytest.mark.parametrize(
    ("expected", "klass", "command"), ROWS, ids=[f"{r[1]}:{r[2][:40]}" for r in ROWS]
)
def test_adversarial_row(default_engine, expected: str, klass: str, command: str) -> None:
    decision = default_engine.decide(Action("exec", command), ctx())
    if expected == "notallow":
        assert decision.verdict in ("ask", "deny"), decision.reason
    else:
        assert decision.verdict == expected, decision.reason
    assert decision.reason
