"""The YAML examples in the READMEs and docs are valid configs (a doc must not lie)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from agentvisor.config import config_from_dict
from agentvisor.frontends.cli import build_parser
from tests.conftest import REPO

DOCS = ["README.md", "README.ja.md", "docs/configuration.md"]


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


@pytest.mark.parametrize("doc", DOCS)
def test_yaml_examples_are_valid_configs(doc):
    blocks = [b for b in yaml_blocks((REPO / doc).read_text()) if "mcp_servers" not in b]
    assert blocks, f"{doc} has no YAML example"
    for block in blocks:
        config_from_dict(yaml.safe_load(block), source=f"{doc} example")


READMES = ["README.md", "README.ja.md"]


def agentvisor_commands(text: str) -> list[list[str]]:
    """The arguments of each `agentvisor ...` line in a doc's ```sh blocks."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and Path(words[0]).name == "agentvisor":
                commands.append(words[1:])
    return commands


@pytest.mark.parametrize(
    "doc", READMES + sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
)
def test_every_command_shown_parses(doc, capsys):
    """Each command a README or doc shows in a shell block exists, with the options it is
    shown with."""
    commands = agentvisor_commands((REPO / doc).read_text())
    if doc in READMES:
        assert len(commands) > 10, f"{doc}: too few agentvisor commands found"
    parser = build_parser()
    for argv in commands:
        try:
            parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"{doc}: `agentvisor {shlex.join(argv)}`: {capsys.readouterr().err}")
