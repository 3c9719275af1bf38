"""The analysis budget (issue 16): a command line built to be expensive to analyse gets
an ask (a deny when nobody can be asked) saying it is too complex, never a crash, a hang
or an allow. Each pathological shape has a shallow control: the same construct, nested a
few levels, is followed all the way to the `rm -rf ~` inside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentvisor.actions import Action

from ..conftest import run_cli
from .conftest import ctx, make_engine
from .test_approvals import Answer, FakeChannel, broker

DEEP = 1000
BAD = "rm -rf ~"


def nested(open_: str, close: str, depth: int, inner: str = BAD) -> str:
    return open_ * depth + inner + close * depth


# name → (the construct nested `depth` deep around an inner command)
CONSTRUCTS = {
    "command substitution": lambda d, c: "echo " + nested("$(", ")", d, c),
    "quoted substitution": lambda d, c: "echo " + nested('"$(', ')"', d, c),
    "process substitution": lambda d, c: "cat " + nested("<(", ")", d, c),
    "subshell": lambda d, c: nested("( ", " )", d, c),
    "brace group": lambda d, c: nested("{ ", "; }", d, c),
    "if": lambda d, c: nested("if true; then ", "; fi", d, c),
    "while": lambda d, c: nested("while true; do ", "; done", d, c),
    "until": lambda d, c: nested("until false; do ", "; done", d, c),
    "case": lambda d, c: nested("case x in x) ", ";; esac", d, c),
    "for": lambda d, c: nested("for i in 1; do ", "; done", d, c),
    "function body": lambda d, c: (
        "".join(f"f{i}() {{ " for i in range(d))
        + c
        + "".join(f"; }}; f{i}" for i in reversed(range(d)))
    ),
    "arithmetic": lambda d, c: "echo $((" + nested("(1+", ")", d, f"$({c})") + "))",
    "parameter default": lambda d, c: "echo " + nested("${a:-", "}", d, f"$({c})"),
    "&& chain": lambda d, c: " && ".join(["true"] * d + [c]),
    "pipeline": lambda d, c: " | ".join(["cat"] * d + [c]),
}


@pytest.mark.parametrize("name", CONSTRUCTS)
def test_shallow_nesting_is_followed(default_engine, name: str) -> None:
    command = CONSTRUCTS[name](3, BAD)
    decision = default_engine.decide(Action("exec", command), ctx())
    assert decision.verdict == "deny", (name, command, decision.reason)


@pytest.mark.parametrize("name", CONSTRUCTS)
def test_deep_nesting_is_never_allowed_and_never_crashes(default_engine, name: str) -> None:
    command = CONSTRUCTS[name](DEEP, BAD)
    decision = default_engine.decide(Action("exec", command), ctx())
    assert decision.verdict in ("ask", "deny"), (name, decision.reason)


@pytest.mark.parametrize(
    "name", ["command substitution", "subshell", "if", "while", "function body", "brace group"]
)
def test_deep_nesting_asks_because_it_is_too_complex(default_engine, name: str) -> None:
    decision = default_engine.decide(Action("exec", CONSTRUCTS[name](DEEP, "ls")), ctx())
    assert decision.verdict == "ask"
    assert "too complex to analyse" in decision.reason


def test_doubling_variable_is_stopped(default_engine) -> None:
    command = "a=xx; " + "a=$a$a; " * 28 + "echo $a"
    decision = default_engine.decide(Action("exec", command), ctx())
    assert decision.verdict == "ask"
    assert "too complex to analyse" in decision.reason


def test_few_doublings_are_fine(default_engine) -> None:
    command = "a=xx; " + "a=$a$a; " * 5 + "echo $a"
    assert default_engine.decide(Action("exec", command), ctx()).verdict == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "{a,b}" * 200,  # 2**200 words
        "echo " + nested("{a,", "}", DEEP, "b"),
        "for a in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do " * 8 + "x=1; " + "done; " * 8,
        "; ".join(["ls"] * 20_000),
    ],
    ids=["brace product", "nested braces", "nested loops", "20000 commands"],
)
def test_other_blowups_ask(default_engine, command: str) -> None:
    decision = default_engine.decide(Action("exec", command), ctx())
    assert decision.verdict == "ask", decision.reason
    assert "too complex to analyse" in decision.reason or "more commands" in decision.reason


def test_brace_words_beyond_the_limit_are_not_kept_as_written(default_engine) -> None:
    # Kept unexpanded, `{rm,-rf,~}…` would be one unknown program name; bash runs rm.
    command = "{rm,-rf,~}" + "{,}" * 11
    assert default_engine.decide(Action("exec", command), ctx()).verdict != "allow"
    assert default_engine.decide(Action("exec", "{rm,-rf,~}"), ctx()).verdict == "deny"


def test_too_complex_asks_even_with_dynamic_code_switched_off() -> None:
    engine = make_engine({"policy": {"categories": {"dynamic_code": False}}})
    decision = engine.decide(Action("exec", CONSTRUCTS["subshell"](DEEP, "ls")), ctx())
    assert decision.verdict == "ask" and "too complex" in decision.reason


def test_too_complex_is_denied_when_unattended(tmp_path: Path, default_engine) -> None:
    action = Action("exec", CONSTRUCTS["command substitution"](DEEP, "ls"))
    context = ctx()
    decision = default_engine.decide(action, context)
    b = broker(tmp_path, [FakeChannel("t", Answer("once", "t"), available=False)], timeout=300)
    final = b.resolve(action, context, decision)
    assert final.verdict == "deny" and final.approver == "unattended"


@pytest.mark.parametrize("name", ["command substitution", "subshell", "parameter default"])
def test_check_exec_never_prints_a_traceback(tmp_path: Path, name: str) -> None:
    result = run_cli("check", "exec", CONSTRUCTS[name](DEEP, "ls"), cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode == 0 and '"decision"' in result.stdout


def test_a_nul_byte_is_never_allowed(default_engine) -> None:
    decision = default_engine.decide(Action("exec", "ls\x00rm -rf ~"), ctx())
    assert decision.verdict == "ask" and "NUL" in decision.reason
    assert default_engine.decide(Action("exec", "ls"), ctx()).verdict == "allow"  # control


class FastClock:
    """A clock that moves a millisecond every time it is read: any loop that looks at the
    budget's clock is stopped within a few dozen looks."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        self.now += 0.001
        return self.now


def test_the_parts_of_one_word_look_at_the_clock(monkeypatch, default_engine) -> None:
    """A word of 120,000 parts (one per escaped character) was expanded part by part
    without the budget's clock (issue 16, a new variant: 0.4 s, then allowed)."""
    from agentvisor.policy import limits

    monkeypatch.setattr(limits, "time", FastClock())
    decision = default_engine.decide(Action("exec", "echo " + "\\ab" * 60_000), ctx())
    assert decision.verdict == "ask" and "takes longer than" in decision.reason, decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "\\r\\m -rf /",  # escaped letters, read as one quoted part, are still the program rm
        "\\rm -rf /",
        "[[ -n x && -n y ]] && rm -rf /",
        "rm -rf " + nested("{a,", "}", 3, "/"),
    ],
)
def test_words_read_in_fewer_parts_mean_the_same(default_engine, command) -> None:
    assert default_engine.decide(Action("exec", command), ctx()).verdict == "deny", command


@pytest.mark.parametrize(
    "command",
    [
        "$'\\x72\\x6d' -rf /",
        "$'\\162\\155' -rf /",
        "printf '\\x72\\x6d -rf /' | sh",
        "printf '%s\\x20-rf /' rm | sh",
        "printf '%b' '\\x72m -rf /' | sh",
    ],
)
def test_escapes_decoded_in_one_pass_mean_what_bash_makes_of_them(default_engine, command):
    assert default_engine.decide(Action("exec", command), ctx()).verdict == "deny", command


def test_a_printf_that_repeats_its_format_past_the_limit_asks(default_engine) -> None:
    command = "printf '" + "x" * 100_000 + "%s' " + "a " * 5_000 + "| sh"
    decision = default_engine.decide(Action("exec", command), ctx())
    assert decision.verdict == "ask", decision.reason


def test_judging_has_a_budget_of_its_own(monkeypatch) -> None:
    """Ten wrappers around a command of 1,000 words are ten commands of 1,000 words to
    judge: past the budget the rest is not judged, and the command asks."""
    import time

    from agentvisor.policy.judge import Judge

    command = "timeout 5 " * 9 + "cat " + " ".join(f"a{i}" for i in range(60))
    engine = make_engine()
    assert engine.decide(Action("exec", command), ctx()).verdict == "allow"  # control
    judged = Judge.invocation

    def slow(self, inv):  # checks as slow as a loaded machine makes them
        time.sleep(0.005)
        return judged(self, inv)

    monkeypatch.setattr(Judge, "invocation", slow)
    decision = make_engine().decide(Action("exec", command), ctx())
    assert decision.verdict == "ask" and "analysing and judging it take" in decision.reason
