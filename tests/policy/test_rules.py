"""The rule language, precedence, the hardline floor, conditions, expiry and defaults."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from agentvisor.actions import Action
from agentvisor.errors import ConfigError
from agentvisor.policy.globs import pattern_regex

from .conftest import HOME, WORKSPACE, ctx, make_engine


def rule(decision: str, kind: str, pattern: str, **kw: object) -> dict[str, object]:
    return {"decision": decision, "kind": kind, "pattern": pattern, **kw}


def verdict(engine, kind: str, target: str, **kw: object) -> str:
    context = ctx(**{k: kw.pop(k) for k in ("session", "agent", "toolset", "tool") if k in kw})
    return engine.decide(Action(kind, target, **kw), context).verdict  # type: ignore[arg-type]


# --- exec patterns --------------------------------------------------------------------


def test_exec_exact_prefix_and_glob_forms() -> None:
    e = make_engine(
        {
            "rules": [
                rule("deny", "exec", "git status"),
                rule("deny", "exec", "npm run *"),
                rule("deny", "exec", "make test-*"),
            ]
        }
    )
    assert verdict(e, "exec", "git status") == "deny"
    assert verdict(e, "exec", "git status -s") == "allow"  # exact: no extra arguments
    assert verdict(e, "exec", "npm run build --prod") == "deny"
    assert verdict(e, "exec", "npm run") == "deny"
    assert verdict(e, "exec", "npm ci") == "allow"
    assert verdict(e, "exec", "make test-unit") == "deny"
    assert verdict(e, "exec", "make build") == "allow"


def test_exec_rules_match_each_simple_command_after_analysis() -> None:
    e = make_engine({"rules": [rule("deny", "exec", "curl *")]})
    for command in (
        "ls && curl x",
        "/usr/bin/curl x",
        "c''url x",
        "sudo curl x",
        "bash -c 'curl x'",
        "echo $(curl x)",
        "env A=1 curl x",
    ):
        assert verdict(e, "exec", command) == "deny", command
    assert verdict(e, "exec", "echo curl") == "allow"


def test_allow_rules_never_match_what_is_only_known_at_run_time() -> None:
    e = make_engine({"rules": [rule("allow", "exec", "* *"), rule("allow", "exec", "eval x")]})
    assert verdict(e, "exec", "$CMD x") == "ask"
    assert verdict(e, "exec", "eval $X") == "ask"


def test_allow_rule_lifts_a_category_ask() -> None:
    e = make_engine({"rules": [rule("allow", "exec", "git push --force *")]})
    d = e.decide(Action("exec", "git push --force origin main"), ctx())
    assert d.verdict == "allow"
    assert d.rule == "test.yaml rules[0]"
    assert verdict(e, "exec", "git push -f origin main") == "ask"


# --- precedence and the hardline floor ------------------------------------------------


def test_precedence_deny_over_ask_over_allow() -> None:
    e = make_engine(
        {
            "rules": [
                rule("allow", "exec", "docker *"),
                rule("ask", "exec", "docker run *"),
                rule("deny", "exec", "docker run --privileged *"),
            ]
        }
    )
    assert verdict(e, "exec", "docker ps") == "allow"
    assert verdict(e, "exec", "docker run alpine") == "ask"
    assert verdict(e, "exec", "docker run --privileged alpine") == "deny"


def test_strictest_simple_command_decides() -> None:
    e = make_engine({"rules": [rule("deny", "exec", "curl *")]})
    d = e.decide(Action("exec", "git push -f; curl x"), ctx())
    assert d.verdict == "deny" and d.rule == "test.yaml rules[0]"
    assert any("git push -f" in x for x in d.details)


def test_hardline_is_not_lifted_by_rules() -> None:
    e = make_engine(
        {
            "rules": [
                rule("allow", "exec", "*"),
                rule("allow", "exec", "rm -rf /"),
                rule("allow", "write", "/dev/**"),
            ],
            "approvals": {"mode": "off"},
        }
    )
    d = e.decide(Action("exec", "rm -rf /"), ctx())
    assert d.verdict == "deny" and d.hardline and d.rule == "hardline:delete_system"
    assert verdict(e, "write", "/dev/sda") == "deny"
    assert verdict(e, "exec", "ls") == "allow"  # control: the allow-all rule works


def test_rule_id_names_the_rule() -> None:
    e = make_engine({"rules": [rule("deny", "exec", "rm *", id="no-rm", reason="use trash")]})
    d = e.decide(Action("exec", "rm x"), ctx())
    assert d.rule == "no-rm" and "use trash" in d.reason
    assert "no-rm" in (d.hint or "")


# --- conditions and expiry ------------------------------------------------------------


def test_conditions_on_session_agent_toolset_tool() -> None:
    e = make_engine(
        {
            "rules": [
                rule(
                    "deny",
                    "exec",
                    "ls",
                    when={"session": "ci-*", "agent": ["hermes", "claude"], "toolset": "terminal"},
                )
            ]
        }
    )
    assert verdict(e, "exec", "ls", session="ci-7", agent="claude", toolset="terminal") == "deny"
    assert verdict(e, "exec", "ls", session="dev", agent="claude", toolset="terminal") == "allow"
    assert verdict(e, "exec", "ls", session="ci-7", agent="other", toolset="terminal") == "allow"
    assert verdict(e, "exec", "ls", session="ci-7", agent="claude") == "allow"


def test_time_window_and_days() -> None:
    now = time.localtime()
    minute = now.tm_hour * 60 + now.tm_min
    inside = f"{(minute // 60):02d}:{minute % 60:02d}-23:59" if minute < 23 * 60 + 59 else None
    outside_start = (minute + 120) % 1440
    outside_end = (minute + 180) % 1440
    outside = (
        f"{outside_start // 60:02d}:{outside_start % 60:02d}-"
        f"{outside_end // 60:02d}:{outside_end % 60:02d}"
    )
    rules = [
        rule("deny", "exec", "a", when={"time": outside}),
        rule(
            "deny",
            "exec",
            "b",
            when={"days": [["mon", "tue", "wed", "thu", "fri", "sat", "sun"][now.tm_wday]]},
        ),
    ]
    if inside:
        rules.append(rule("deny", "exec", "c", when={"time": inside}))
    e = make_engine({"rules": rules})
    assert verdict(e, "exec", "a") == "allow"
    assert verdict(e, "exec", "b") == "deny"
    if inside:
        assert verdict(e, "exec", "c") == "deny"


def test_expired_rules_stop_matching() -> None:
    past = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    future = dt.date.today() + dt.timedelta(days=1)
    e = make_engine(
        {
            "rules": [
                rule("deny", "exec", "a", expires=past),
                rule("deny", "exec", "b", expires=str(future)),
                rule("deny", "exec", "c", expires=dt.date.today()),
            ]
        }
    )
    assert verdict(e, "exec", "a") == "allow"
    assert verdict(e, "exec", "b") == "deny"
    assert verdict(e, "exec", "c") == "deny"  # a date lasts to the end of that day


# --- paths ----------------------------------------------------------------------------


def test_path_patterns_relative_home_and_absolute() -> None:
    e = make_engine(
        {
            "rules": [
                rule("deny", "read", "secrets/"),
                rule("deny", "read", "*.key"),
                rule("deny", "read", "~/notes/**"),
                rule("deny", "read", "/srv/data/*.db"),
                rule("deny", "write", "./build"),
            ]
        }
    )
    assert verdict(e, "read", "secrets/a.txt") == "deny"
    assert verdict(e, "read", "deep/secrets/a.txt") == "deny"
    assert verdict(e, "read", "a/b/server.key") == "deny"
    assert verdict(e, "read", "~/notes/x/y") == "deny"
    assert verdict(e, "read", f"{HOME}/notes/y") == "deny"
    assert verdict(e, "read", "/srv/data/x.db") == "deny"
    assert verdict(e, "read", "/srv/data/sub/x.db") == "allow"
    assert verdict(e, "write", "build/out.o") == "deny"
    assert verdict(e, "write", "src/build") == "allow"  # ./ anchors at the workspace
    assert verdict(e, "read", "/elsewhere/secrets/a") == "allow"  # relative = workspace


def test_read_and_write_rules_also_hold_for_commands() -> None:
    e = make_engine({"rules": [rule("deny", "read", "private/"), rule("ask", "write", "/srv/**")]})
    assert verdict(e, "exec", "cat private/plan.txt") == "deny"
    assert verdict(e, "exec", "grep -r x < private/a") == "deny"
    assert verdict(e, "exec", "echo x > /srv/out") == "ask"
    assert verdict(e, "exec", "cat public/plan.txt") == "allow"


def test_write_default_is_the_workspace() -> None:
    e = make_engine({"files": {"write_roots": ["/data/out"]}})
    assert verdict(e, "write", f"{WORKSPACE}/a") == "allow"
    assert verdict(e, "write", "../escape") == "ask"
    assert verdict(e, "write", "/data/out/x") == "allow"
    assert verdict(e, "write", "/data/outside") == "ask"


@pytest.mark.parametrize(
    "pattern",
    [
        "*.py",
        "build/",
        "/build",
        "src/**/*.c",
        "**/tmp",
        "a/**",
        "doc/*.md",
        "x?z",
        "[ab]c",
        "foo/bar/",
        ".env*",
    ],
)
def test_globs_agree_with_pathspec(pattern: str) -> None:
    pathspec = pytest.importorskip("pathspec")
    spec = pathspec.PathSpec.from_lines("gitignore", [pattern])
    import re

    mine = re.compile(pattern_regex(pattern)[0])
    for path in (
        "a.py",
        "src/a.py",
        "build/x",
        "src/build/x",
        "build",
        "src/x/y/z.c",
        "src/z.c",
        "tmp",
        "a/tmp",
        "a/b",
        "a",
        "doc/x.md",
        "doc/x/y.md",
        "xyz",
        "ac",
        "bc",
        "cc",
        ".env",
        "sub/.env.local",
        "foo/bar/baz",
    ):
        assert spec.match_file(path) == bool(mine.match(path)), (pattern, path)


# --- fetch, secret, tool ---------------------------------------------------------------


def test_fetch_defaults_depend_on_the_tool() -> None:
    e = make_engine()
    assert verdict(e, "fetch", "https://example.com/x", method="GET", tool="web_extract") == "allow"
    assert verdict(e, "fetch", "https://example.com/x", method="POST", tool="web_extract") == "ask"
    assert verdict(e, "fetch", "http://10.0.0.5/", method="GET", tool="web_extract") == "ask"
    assert verdict(e, "fetch", "example.com:443", tool="proxy") == "deny"
    assert verdict(e, "fetch", "https://example.com/", tool="http_request") == "ask"
    assert verdict(e, "fetch", "file:///etc/passwd", tool="web_extract") == "deny"
    assert verdict(e, "fetch", "gopher://127.0.0.1:6379/", tool="web_extract") == "deny"


def test_host_patterns() -> None:
    e = make_engine(
        {
            "rules": [
                rule("allow", "fetch", "github.com"),
                rule("allow", "fetch", "*.example.org"),
                rule("allow", "fetch", "api.test:8443", methods=["POST"]),
            ]
        }
    )
    assert verdict(e, "fetch", "https://github.com/a", tool="proxy") == "allow"
    assert verdict(e, "fetch", "https://api.github.com/a", tool="proxy") == "deny"
    assert verdict(e, "fetch", "https://x.example.org/", tool="proxy") == "allow"
    assert verdict(e, "fetch", "https://example.org/", tool="proxy") == "deny"
    assert verdict(e, "fetch", "https://evilexample.org/", tool="proxy") == "deny"
    assert verdict(e, "fetch", "https://api.test:8443/", method="POST", tool="proxy") == "allow"
    assert verdict(e, "fetch", "https://api.test:8443/", method="GET", tool="proxy") == "deny"
    assert verdict(e, "fetch", "https://api.test/", method="POST", tool="proxy") == "deny"


def test_allows_exact_host() -> None:
    e = make_engine(
        {
            "rules": [
                rule("allow", "fetch", "10.0.0.5"),
                rule("allow", "fetch", "*.corp.internal"),
                rule("allow", "fetch", "db.lan:5432"),
                rule("allow", "fetch", "blocked.lan"),
                rule("deny", "fetch", "blocked.lan"),
            ]
        }
    )
    d = e.allows_exact_host("10.0.0.5", 80, ctx())
    assert d is not None and d.verdict == "allow" and d.rule == "test.yaml rules[0]"
    assert e.allows_exact_host("a.corp.internal", 443, ctx()) is None  # wildcard: no
    assert e.allows_exact_host("db.lan", 5432, ctx()) is not None
    assert e.allows_exact_host("db.lan", 80, ctx()) is None
    assert e.allows_exact_host("blocked.lan", 80, ctx()) is None  # a deny rule wins
    assert e.allows_exact_host("10.0.0.6", 80, ctx()) is None


def test_secret_rules() -> None:
    e = make_engine(
        {
            "rules": [
                rule("allow", "secret", "GITHUB_TOKEN@api.github.com"),
                rule("allow", "secret", "CI_*"),
            ]
        }
    )
    assert verdict(e, "secret", "GITHUB_TOKEN", host="api.github.com") == "allow"
    assert verdict(e, "secret", "GITHUB_TOKEN", host="evil.example") == "ask"
    assert verdict(e, "secret", "CI_KEY", host="anything.example") == "allow"
    assert verdict(e, "secret", "OTHER", host="api.github.com") == "ask"


def test_tool_rules() -> None:
    e = make_engine({"rules": [rule("allow", "tool", "web_*"), rule("deny", "tool", "web_post")]})
    assert verdict(e, "tool", "web_search") == "allow"
    assert verdict(e, "tool", "web_post") == "deny"
    assert verdict(e, "tool", "other") == "ask"


def test_defaults_are_configurable() -> None:
    e = make_engine({"policy": {"defaults": {"exec": "ask", "read": "deny", "tool": "allow"}}})
    assert verdict(e, "exec", "ls") == "ask"
    assert verdict(e, "read", "README") == "deny"
    assert verdict(e, "tool", "x") == "allow"


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (rule("allow", "fetch", "https://github.com/x"), "no scheme"),
        (rule("allow", "fetch", "git*.com"), "stand alone"),
        (rule("allow", "exec", "'unclosed"), "exec pattern"),
        (rule("allow", "read", "!x"), "negated"),
        (rule("allow", "exec", "ls", when={"time": "9-5"}), "HH:MM"),
        (rule("allow", "exec", "ls", methods=["GET"]), "only fetch"),
        (rule("allow", "exec", "ls", expires="soon"), "expires"),
        (rule("allow", "exec", "ls", id="grant:x"), "reserved"),
        ({"decision": "maybe", "kind": "exec", "pattern": "ls"}, "decision"),
        ({"decision": "allow", "kind": "exec", "pattern": "ls", "extra": 1}, "unknown key"),
    ],
)
def test_bad_rules_are_config_errors(bad: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_engine({"rules": [bad]})
    assert message in str(err.value)
    assert "rules" in str(err.value)
