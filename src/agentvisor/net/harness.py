"""An agent harness (Codex CLI, Claude Code, Hermes Agent, ...) run inside the sandbox.

A profile is data (``agentvisor/data/harness-NAME.yaml``): the harness's state
directories, the environment variables it reads its keys from and the secret each one
stands for, and the API hosts it needs. `agentvisor run` gives the harness:

- its state directories (``~/.codex``, ...) from a place agentvisor manages
  (``$XDG_DATA_HOME/agentvisor/harness/NAME/``), never the user's real home;
- for each key, the placeholder ``{{secret:NAME}}`` in the environment, never the value:
  the egress proxy fills it in toward the secret's own hosts (`intercept`);
- the profile's hosts as allowed proxy destinations (`HarnessPolicy`), beneath every
  rule of the operator's config: a deny or ask rule still wins.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..actions import Action, Context, Decision
from ..errors import ConfigError, NetworkBlocked
from ..paths import data_dir
from ..records import replace
from ..sandbox.base import Attachment
from .access import Policy
from .guard import parse_hostport, parse_url
from .secrets import SecretStore, host_matches, placeholder

PROFILES = Path(__file__).resolve().parent.parent / "data"


class HarnessKey(BaseModel):
    """An environment variable the harness reads a key from, and the secret it stands for."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    env: str = Field(description="the variable's name, e.g. OPENAI_API_KEY", min_length=1)
    secret: str = Field(description="the name of the configured secret", min_length=1)


class HarnessProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(description="the profile's name (--profile NAME)", min_length=1)
    description: str = Field(default="", description="what the harness is")
    programs: list[str] = Field(
        default_factory=list, description="program names that select this profile by default"
    )
    state_dirs: list[str] = Field(
        default_factory=list, description="directories below HOME the harness keeps state in"
    )
    keys: list[HarnessKey] = Field(default_factory=list, description="keys, as placeholders")
    hosts: list[str] = Field(
        default_factory=list, description="API hosts the harness needs (host, host:port, *.dom)"
    )


def profile_names() -> list[str]:
    return sorted(p.stem.removeprefix("harness-") for p in PROFILES.glob("harness-*.yaml"))


def load_profile(name: str | None, program: str) -> HarnessProfile:
    """The profile called ``name`` (or in the YAML file ``name``), else the one whose
    ``programs`` include ``program``, else ``generic``."""
    from ..config import read_yaml

    if name is None:
        for candidate in profile_names():
            profile = load_profile(candidate, program)
            if os.path.basename(program) in profile.programs:
                return profile
        name = "generic"
    path = Path(name) if name.endswith((".yaml", ".yml")) else PROFILES / f"harness-{name}.yaml"
    if not path.is_file():
        known = ", ".join(profile_names())
        raise ConfigError(f"no harness profile {name!r} (known: {known}, or a .yaml file)")
    document = read_yaml(path, " (a harness profile)")
    try:
        return HarnessProfile.model_validate(document.data)
    except ValidationError as exc:
        problems = "; ".join(
            _problem(e["loc"], e["msg"], document.line_of(e["loc"])) for e in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from None


def _problem(loc: tuple[int | str, ...], msg: str, line: int | None) -> str:
    where = ".".join(str(p) for p in loc) or "top level"
    return f"{where}{f' (line {line})' if line else ''}: {msg}"


def state_home(profile: HarnessProfile) -> Path:
    return data_dir() / "harness" / profile.name


def harness_attachment(
    profile: HarnessProfile, proxy_attachment: Attachment, secrets: SecretStore
) -> tuple[Attachment, list[str]]:
    """The proxy's attachment plus the harness's state directories and placeholders; and
    warnings (a key whose secret is not configured)."""
    home = str(Path.home())
    binds = dict(proxy_attachment.binds)
    for name in profile.state_dirs:
        if os.path.isabs(name) or ".." in Path(name).parts:
            raise ConfigError(
                f"profile {profile.name}: state_dirs entry {name!r} must be below HOME"
            )
        host_dir = state_home(profile) / name
        host_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        binds[str(host_dir)] = os.path.join(home, name)
    env = dict(proxy_attachment.env)
    warnings = []
    for key in profile.keys:
        if key.secret in secrets.names:
            env[key.env] = placeholder(key.secret)
        else:
            warnings.append(
                f"{key.env}: no secret {key.secret} is configured (secrets: in the config), "
                "so the harness gets no value for it"
            )
    return replace(proxy_attachment, binds=binds, env=env), warnings


class HarnessPolicy:
    """The operator's policy, plus allow for what the harness profile needs: its hosts
    through the proxy and its keys' secrets. Only a default gives way: any rule of the
    operator (deny, ask or allow) and the hardline floor decide as they would."""

    def __init__(self, base: Policy, profile: HarnessProfile) -> None:
        self.base = base
        self.profile = profile
        self._secrets = {key.secret for key in profile.keys}

    def decide(self, action: Action, context: Context) -> Decision:
        decision = self.base.decide(action, context)
        if decision.allowed or not (decision.rule or "").startswith("default:"):
            return decision
        rule = f"profile:{self.profile.name}"
        if action.kind == "fetch" and self._needs(action.target):
            return Decision("allow", f"the {self.profile.name} harness needs this host", rule)
        if action.kind == "secret" and action.target in self._secrets:
            return Decision(
                "allow", f"the {self.profile.name} harness reads this key (as a placeholder)", rule
            )
        return decision

    def allows_exact_host(self, host: str, port: int, context: Context) -> Decision | None:
        return self.base.allows_exact_host(host, port, context)

    def _needs(self, target: str) -> bool:
        try:
            parsed = parse_url(target) if "://" in target else parse_hostport(target)
        except NetworkBlocked:
            return False
        return host_matches(self.profile.hosts, parsed.host, parsed.port)
