"""The network, secrets and web_search config sections."""

from __future__ import annotations

import pytest

from agentvisor.config import config_from_dict
from agentvisor.errors import ConfigError


def test_defaults() -> None:
    config = config_from_dict({})
    assert config.network.max_redirects == 5 and config.network.timeout == 30.0
    assert config.secrets == [] and config.web_search.provider == "none"


def test_a_full_network_section_loads() -> None:
    config = config_from_dict(
        {
            "network": {
                "max_response_bytes": 1000,
                "timeout": 5,
                "max_redirects": 2,
                "block": ["203.0.113.0/24"],
                "proxy_port": 8080,
            },
            "secrets": [
                {
                    "name": "GITHUB_TOKEN",
                    "env": "GITHUB_TOKEN",
                    "hosts": ["api.github.com"],
                    "header": "Authorization: Bearer {value}",
                }
            ],
            "web_search": {"provider": "brave", "api_key_secret": "GITHUB_TOKEN"},
        }
    )
    assert config.secrets[0].hosts == ["api.github.com"]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"network": {"timeout": 0}}, "network.timeout"),
        ({"network": {"max_redirects": 50}}, "network.max_redirects"),
        ({"network": {"block": ["not-a-range"]}}, "network.block"),
        ({"network": {"colour": "red"}}, "unknown key"),
        ({"secrets": [{"name": "A", "hosts": ["x"]}]}, "exactly one of env or file"),
        ({"secrets": [{"name": "A", "env": "A", "file": "/f", "hosts": ["x"]}]}, "exactly one"),
        ({"secrets": [{"name": "A", "env": "A", "hosts": []}]}, "at least one host"),
        ({"secrets": [{"name": "A B", "env": "A", "hosts": ["x"]}]}, "letters, digits"),
        ({"secrets": [{"name": "A", "env": "A", "hosts": ["x"], "header": "Bearer"}]}, "header"),
        (
            {
                "secrets": [
                    {"name": "A", "env": "A", "hosts": ["x"]},
                    {"name": "A", "env": "B", "hosts": ["y"]},
                ]
            },
            "defined twice",
        ),
        ({"web_search": {"provider": "searxng"}}, "web_search.url"),
        ({"web_search": {"provider": "brave", "api_key_secret": "NOPE"}}, "api_key_secret"),
        ({"web_search": {"provider": "bing"}}, "web_search.provider"),
    ],
)
def test_bad_values_are_named(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(data)
