"""The exceptions agentvisor raises, as one tree so a caller knows what to catch.

AgentvisorError                  anything agentvisor refuses or fails to do
├── ConfigError                  a config file or option is wrong (names file and key)
├── PolicyDenied                 the policy or a person refused an action; has the decision
├── SandboxError                 the sandbox could not be built or run
│   ├── SandboxUnavailable       this machine cannot run the backend (`agentvisor doctor`)
│   └── LimitNotEnforced         a configured limit cannot be enforced here
├── QuotaExceeded                a client already holds its quota of sessions or calls
├── NotGrantable                 a refusal's id names nothing a person may grant now
└── NetworkBlocked               a destination was refused; carries the destination and the rule
"""

from __future__ import annotations


class AgentvisorError(Exception):
    """Base class of every error agentvisor raises on purpose."""


class ConfigError(AgentvisorError):
    """A configuration file, key or command-line option is invalid."""


class PolicyDenied(AgentvisorError):
    """An action was refused. ``decision`` holds the full decision with its reason."""

    def __init__(self, message: str, decision: object = None) -> None:
        super().__init__(message)
        self.decision = decision


class SandboxError(AgentvisorError):
    """The sandbox failed to start or run the command."""


class SandboxUnavailable(SandboxError):
    """The configured backend cannot run on this machine."""


class LimitNotEnforced(SandboxError):
    """A configured resource limit cannot be enforced and unenforced limits are not allowed."""


class QuotaExceeded(AgentvisorError):
    """A client holds as many sessions or running calls as its quota allows."""


class NotGrantable(AgentvisorError):
    """``agentvisor grant --ask ID``: the id is unknown, expired, already granted or
    another user's."""


class NetworkBlocked(AgentvisorError):
    """A network destination was refused by the destination guard or the policy."""

    def __init__(self, message: str, destination: str = "", rule: str = "") -> None:
        super().__init__(message)
        self.destination = destination
        self.rule = rule
