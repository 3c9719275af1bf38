"""The YAML examples in the READMEs and docs are valid configs (a doc must not lie)."""

from __future__ import annotations

import re

import pytest
import yaml

from agentvisor.config import config_from_dict
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
