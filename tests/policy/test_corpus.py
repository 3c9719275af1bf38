"""The shared command corpora (development set) and agentvisor's own extra variants.

Every dangerous row must be ask or deny, every ``deny`` row deny, and at least 98% of the
benign rows allow under the default policy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentvisor.actions import Action

from .conftest import ctx

EXTRA = Path(__file__).with_name("commands-extra.tsv")


def _rows(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cols = line.split("\t")
        rows.append((cols[0], cols[-1].replace("\\n", "\n")))
    return rows


def _verdict(engine, command: str) -> str:
    return engine.decide(Action("exec", command), ctx()).verdict


def test_dangerous_corpus(shared_corpus: Path, default_engine) -> None:
    rows = _rows(shared_corpus / "commands-dangerous.tsv")
    assert len(rows) > 100
    wrong = []
    for expected, command in rows:
        verdict = _verdict(default_engine, command)
        if verdict == "allow" or (expected == "deny" and verdict != "deny"):
            wrong.append(f"{expected} → {verdict}: {command}")
    assert not wrong, "\n".join(wrong)


def test_benign_corpus(shared_corpus: Path, default_engine) -> None:
    rows = _rows(shared_corpus / "commands-benign.tsv")
    assert len(rows) > 400
    refused = [c for _, c in rows if _verdict(default_engine, c) != "allow"]
    share = 1 - len(refused) / len(rows)
    assert share >= 0.98, f"{share:.1%} allowed; not allowed:\n" + "\n".join(refused)


@pytest.mark.parametrize(("expected", "command"), _rows(EXTRA), ids=lambda v: v[:60])
def test_extra_variants(default_engine, expected: str, command: str) -> None:
    verdict = _verdict(default_engine, command)
    if expected == "ask":
        assert verdict in ("ask", "deny"), command
    else:
        assert verdict == expected, command
