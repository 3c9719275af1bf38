"""The command line: exit statuses, pass-through I/O, errors, doctor, demo, fast start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import AGENTVISOR, requires_bwrap, run_cli


def test_log_writes_out_control_characters_from_agents(tmp_path):
    """A command's output, arguments or an agent's name with terminal sequences in them is
    shown in the table, never sent to the person's terminal."""
    from agentvisor.state import AuditStore
    from agentvisor.state.events import AuditEvent

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    AuditStore.open(url).record(
        AuditEvent(
            kind="call",
            session="s-1",
            agent="a\x1b]0;title\x07",
            tool="terminal",
            arguments={"command": "echo \x9b2J"},
            decision="allow",
            result="out\x1b]52;c;cm0gLXJm\x07\u202e",
        )
    )
    out = run_cli("log", "--url", url, cwd=tmp_path).stdout
    assert not any(c in out for c in "\x1b\x07\x9b\u202e"), repr(out)
    assert "out\\x1b]52;c;cm0gLXJm\\x07\\u202e" in out
    # Control: the event holds the raw characters (--json keeps them, JSON-escaped).
    assert "\\u001b]52" in run_cli("log", "--url", url, "--json", cwd=tmp_path).stdout


@requires_bwrap
def test_exec_passes_status_and_output(tmp_path):
    r = run_cli("exec", "--", "sh", "-c", "echo out; echo err >&2; exit 7", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (7, "out\n", "err\n")


@requires_bwrap
def test_exec_passes_stdin(tmp_path):
    r = run_cli("exec", "--", "tr", "a-z", "A-Z", cwd=tmp_path, input="hello\n")
    assert r.stdout == "HELLO\n"


@requires_bwrap
def test_exec_defaults_to_the_current_directory(tmp_path):
    r = run_cli("exec", "--", "sh", "-c", "pwd; touch made-here", cwd=tmp_path)
    assert r.stdout.strip() == str(tmp_path) and (tmp_path / "made-here").exists()


@requires_bwrap
def test_exec_timeout_is_124(tmp_path):
    r = run_cli("exec", "--timeout", "1", "--", "sleep", "30", cwd=tmp_path)
    assert r.returncode == 124 and "timed out" in r.stderr


@requires_bwrap
def test_exec_signal_status(tmp_path):
    r = run_cli("exec", "--", "sh", "-c", "kill -TERM $$", cwd=tmp_path)
    assert r.returncode == 128 + 15


def test_exec_refusal_is_125_with_one_line_reason(tmp_path):
    r = run_cli("exec", "--workspace", str(tmp_path / "missing"), "--", "true", cwd=tmp_path)
    assert r.returncode == 125
    assert r.stderr.startswith("agentvisor: ") and r.stderr.count("\n") == 1


def test_exec_bad_config_is_125_and_names_the_key(tmp_path):
    (tmp_path / "agentvisor.yaml").write_text("sandbox:\n  pidz: 3\n")
    r = run_cli("exec", "--", "true", cwd=tmp_path)
    assert r.returncode == 125 and "sandbox.pidz: unknown key" in r.stderr


def test_exec_without_command(tmp_path):
    r = run_cli("exec", cwd=tmp_path)
    assert r.returncode == 125 and "needs a command" in r.stderr


@requires_bwrap
def test_exec_dry_run_prints_the_sandbox(tmp_path):
    r = run_cli("exec", "--dry-run", "--", "true", cwd=tmp_path)
    assert r.returncode == 0
    for flag in ("--unshare-net", "--cap-drop ALL", "--seccomp", "--new-session"):
        assert flag in r.stdout


@requires_bwrap
def test_local_backend_warns(tmp_path):
    r = run_cli("exec", "--backend", "local", "--", "true", cwd=tmp_path)
    assert r.returncode == 0 and "WITHOUT isolation" in r.stderr


HEAVY = ("pydantic", "yaml", "tree_sitter", "httpx", "sqlalchemy", "pyseccomp")


@pytest.mark.parametrize(
    "argv, unwanted",
    [
        (["exec", "--dry-run", "--", "true"], HEAVY),
        # A standalone run reads its options by hand and builds records, not dataclasses.
        (["exec", "--", "true"], (*HEAVY, "argparse", "dataclasses", "typing", "inspect")),
    ],
)
def test_exec_imports_stay_light(tmp_path, argv, unwanted):
    code = (
        f"import sys; from agentvisor.frontends.cli import main; rc = main({argv!r}); "
        f"print(sorted(m for m in {unwanted!r} if m in sys.modules))"
    )
    # A cached seccomp filter is the steady state; build it once first.
    run_cli("exec", "--", "true", cwd=tmp_path)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--", "ls", "-l"],
        ["ls", "-l"],
        ["--timeout", "5", "ls"],
        ["--timeout=2.5", "--", "x"],
        ["--network", "proxy", "--backend", "local", "--", "a"],
        ["--network=none", "a", "--b"],
        ["--config", "c.yaml", "--workspace", "w", "--dry-run", "--", "true"],
        ["--raw-output", "--timeout", "3", "--", "x"],
        ["--network", "none", "--network", "proxy", "x"],
        ["ls", "--timeout", "5"],
        # What only argparse may judge (help, errors, abbreviations): the quick reader declines.
        ["-h"],
        ["--help"],
        ["--timeout", "x", "ls"],
        ["--timeout"],
        ["--network", "web", "x"],
        ["--work", "w", "x"],
        ["--dry-run=1", "x"],
        ["--raw-output=yes", "x"],
        ["--raw", "x"],
        ["--timeout", "-5", "x"],
        ["-"],
        ["--unknown", "x"],
        ["--workspace", "--", "x"],
        ["--timeout="],
    ],
)
def test_exec_quick_reader_agrees_with_argparse(argv, capsys):
    from agentvisor.frontends.cli import build_parser
    from agentvisor.frontends.cli.exec import quick_args

    quick = quick_args(argv)
    if quick is None:
        return  # argparse judges these; the quick reader must never accept them
    full = build_parser("exec").parse_args(["exec", *argv])
    assert vars(quick) == {k: v for k, v in vars(full).items() if k not in ("command", "version")}


def test_exec_quick_reader_declines_what_it_cannot_judge():
    from agentvisor.frontends.cli.exec import quick_args

    for argv in (
        ["-h"],
        ["--timeout", "x", "ls"],
        ["--network", "web", "x"],
        ["--work", "w", "x"],
        ["--timeout"],
        ["--unknown", "x"],
    ):
        assert quick_args(argv) is None, argv


@requires_bwrap
def test_doctor_ok():
    r = run_cli("doctor")
    assert r.returncode == 0, r.stdout
    assert "bubblewrap" in r.stdout and "sandbox run" in r.stdout


@requires_bwrap
def test_doctor_fails_without_bwrap(tmp_path, monkeypatch):
    from agentvisor import hostprogs
    from agentvisor.frontends.cli import doctor_checks as doctor

    assert doctor.check_bwrap().status == "ok"  # control: found in the system directories
    monkeypatch.setattr(hostprogs, "PROGRAM_DIRS", (str(tmp_path),))
    check = doctor.check_bwrap()
    assert check.status == "fail" and "bwrap not found" in check.found and check.fix


@requires_bwrap
def test_demo_runs_and_everything_is_as_expected(isolated_home):
    r = run_cli("demo", env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "UNEXPECTED" not in r.stdout
    assert r.stdout.count("BLOCKED") >= 5


def test_help_lists_commands():
    r = run_cli("--help")
    for command in ("exec", "doctor", "demo"):
        assert command in r.stdout


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`agentvisor check exec ... | head -c 200`: a quiet end with SIGPIPE's status (the
    fix is at the entry point, for every command)."""
    argv = [AGENTVISOR, "check", "exec", "--", "echo", "x " * 60000]  # more than a pipe holds
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.read(200)
    proc.stdout.close()
    err = proc.stderr.read()
    assert (proc.wait(30), err) == (141, b"")
    # Control: read to the end, the whole output comes, with status 0.
    r = subprocess.run(argv, capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith(first) and len(r.stdout) > 120000


def test_log_table_has_a_header_an_agent_column_and_no_lifecycle_noise(tmp_path):
    from agentvisor.state import AuditStore
    from agentvisor.state.events import AuditEvent

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    log = AuditStore.open(url)
    lifecycle = ("session opened", "sandbox started", "sandbox ended", "session closed")
    for what in lifecycle[:2]:
        log.record(AuditEvent(kind="sandbox", session="s-1", agent="claude-code", result=what))
    log.record(
        AuditEvent(
            kind="call",
            session="s-1",
            agent="claude-code",
            tool="terminal",
            arguments={"command": "ls"},
            decision="allow",
            result="a.txt",
        )
    )
    for what in lifecycle[2:]:
        log.record(AuditEvent(kind="sandbox", session="s-1", agent="claude-code", result=what))
    r = run_cli("log", "--url", url, cwd=tmp_path)
    header, *rows = r.stdout.splitlines()
    columns = ["#", "time", "kind", "session", "agent", "tool", "decision", "details"]
    assert header.split() == columns
    assert len(rows) == 1 and rows[0].split()[3:7] == ["call", "s-1", "claude-code", "terminal"]
    assert "4 lifecycle events not shown; --all shows them" in r.stderr
    # The newest call, although lifecycle events came after it.
    assert (
        run_cli("log", "--url", url, "--limit", "1", cwd=tmp_path).stdout.splitlines()[1:] == rows
    )
    # --all and --kind sandbox show them; --json prints every event.
    assert len(run_cli("log", "--url", url, "--all", cwd=tmp_path).stdout.splitlines()) == 6
    assert (
        len(run_cli("log", "--url", url, "--kind", "sandbox", cwd=tmp_path).stdout.splitlines())
        == 5
    )
    assert len(run_cli("log", "--url", url, "--json", cwd=tmp_path).stdout.splitlines()) == 5


@requires_bwrap
def test_doctor_has_lines_for_the_docker_engine_and_image(tmp_path):
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")

    def doctor(*args):
        r = subprocess.run([AGENTVISOR, "doctor", *args], env=env, capture_output=True, text=True)
        lines = {" ".join(line.split()[1:3]): line for line in r.stdout.splitlines()}
        return r.returncode, lines

    status, lines = doctor()
    assert lines["docker engine"].startswith("WARN") and "not reachable" in lines["docker engine"]
    assert (
        lines["docker image"].startswith("WARN") and "agentvisor-sandbox" in lines["docker image"]
    )
    assert status == 0  # optional with the bwrap backend
    # With the docker backend they decide.
    config = tmp_path / "docker.yaml"
    config.write_text("sandbox: {backend: docker}\n")
    status, lines = doctor("--config", str(config))
    assert status == 1 and lines["docker engine"].startswith("FAIL")
