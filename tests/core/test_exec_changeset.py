"""`agentvisor exec` writes through a changeset (issues 13, 14): what the user's own tools
would run later (git internals at any depth, nested repositories, ``agentvisor.yaml`` at
any depth) waits for a person; ordinary edits are applied; the exit status is the
command's. Every attack is checked by its effect on the host, with a control in
``workspace.mode: direct`` (or on the host) showing the probe itself works.

Real parts: the CLI, bwrap, overlayfs, git; the exec helper and a gateway's exec server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agentvisor.changes import Changesets
from tests.conftest import AGENTVISOR, requires_bwrap
from tests.gateway.conftest import free_port

pytestmark = requires_bwrap

GIT = "/usr/bin/git"
REDIRECT = r"""
mkdir -p evil/hooks evil/refs evil/objects
printf '[core]\n\tfsmonitor = "touch {marker}; false"\n' > evil/config
echo ../evil > .git/commondir
echo probe-ran
exit 3
"""
NESTED_HOOK = r"""
mkdir -p sub && git -C sub init -q
printf '#!/bin/sh\ntouch {marker}\n' > sub/.git/hooks/pre-commit
chmod +x sub/.git/hooks/pre-commit
echo probe-ran
"""
DEEP_CONFIG = """
mkdir -p app
printf 'sandbox: {backend: local}\\n' > app/agentvisor.yaml
echo probe-ran
"""
# Another object store whose objects git trusts: a planted alternate points anywhere.
ALTERNATES = """
mkdir -p .git/objects/info
echo /tmp/elsewhere/objects > .git/objects/info/alternates
echo probe-ran
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """`agentvisor exec` run in this process (no helper, no gateway), with its own home
    (the changesets and the audit log live there)."""
    home = tmp_path / "home"
    home.mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    return dict(environ, HOME=str(home), AGENTVISOR_NO_GATEWAY="1")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run([GIT, "init", "-q", str(ws)], check=True)
    (ws / "README.md").write_text("hello\n")
    return ws


def operator_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "operator.yaml"
    path.write_text(text)
    return path


def exec_script(
    repo: Path, env: dict[str, str], script: str, *options: str
) -> subprocess.CompletedProcess[str]:
    (repo / "attack.sh").write_text(script)
    return subprocess.run(
        [AGENTVISOR, "exec", *options, "--", "sh", "attack.sh"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def users_git(repo: Path, *args: str) -> None:
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null")
    subprocess.run([GIT, "-C", str(repo), *args], env=env, capture_output=True, timeout=60)


def direct(tmp_path: Path) -> tuple[str, str]:
    return "--config", str(operator_config(tmp_path, "workspace: {mode: direct}\n"))


# -- .git/commondir, on every path an exec takes ------------------------------------------


@pytest.fixture
def helper(tmp_path: Path, env: dict[str, str], repo: Path):
    """The exec helper a first `agentvisor exec` leaves behind serves the next ones."""
    env = dict(env, XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    subprocess.run([AGENTVISOR, "exec", "--", "true"], env=env, cwd=repo, check=True, timeout=60)
    sock = tmp_path / "run" / "agentvisor" / "exec.sock"
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sock.exists(), "the exec helper did not start"
    yield env
    subprocess.run([AGENTVISOR, "exec-helper", "--stop"], env=env, capture_output=True, timeout=30)


@pytest.fixture
def gateway(tmp_path: Path, env: dict[str, str], repo: Path):
    """A running gateway's exec server serves `agentvisor exec`."""
    env = dict(env, XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    proc = subprocess.Popen(
        [AGENTVISOR, "serve", "--port", str(free_port()), "--workspace", str(repo)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    sock = tmp_path / "run" / "agentvisor" / "exec.sock"
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert sock.exists(), "the gateway did not start its exec server"
    yield env
    proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)
    if proc.poll() is None:
        proc.kill()


@pytest.fixture(params=["in-process", "exec helper", "gateway"])
def served(request: pytest.FixtureRequest, env: dict[str, str]) -> dict[str, str]:
    if request.param == "in-process":
        return env
    fixture = "helper" if request.param == "exec helper" else "gateway"
    served_env: dict[str, str] = request.getfixturevalue(fixture)
    return served_env


def test_a_commondir_planted_by_exec_runs_nothing_at_the_users_next_git(repo, tmp_path, served):
    marker = tmp_path / "PLANTED-CODE-RAN"
    r = exec_script(repo, served, REDIRECT.format(marker=marker))
    assert "probe-ran" in r.stdout, r.stderr
    assert r.returncode == 3, r.stderr  # the command's own status
    assert not (repo / ".git" / "commondir").exists()
    # Ordinary files are applied; the held one is named, with how to review it.
    assert (repo / "evil" / "config").is_file()
    assert ".git/commondir" in r.stderr and "held for a person" in r.stderr
    assert "agentvisor changes" in r.stderr and "agentvisor apply --session exec-" in r.stderr
    users_git(repo, "status")
    assert not marker.exists()


def test_control_the_same_commondir_written_on_the_host_runs_the_planted_code(repo, tmp_path):
    marker = tmp_path / "PLANTED-CODE-RAN"
    (repo / "attack.sh").write_text(REDIRECT.format(marker=marker))
    subprocess.run(["sh", "attack.sh"], cwd=repo, capture_output=True)
    users_git(repo, "status")
    assert marker.exists()


def test_control_in_direct_mode_exec_writes_the_commondir(repo, tmp_path, env):
    marker = tmp_path / "PLANTED-CODE-RAN"
    r = exec_script(repo, env, REDIRECT.format(marker=marker), *direct(tmp_path))
    assert r.returncode == 3 and "held" not in r.stderr, r.stderr
    assert (repo / ".git" / "commondir").read_text() == "../evil\n"


def test_a_person_reviews_and_applies_what_exec_held(repo, tmp_path, env):
    r = exec_script(repo, env, ALTERNATES)
    session = r.stderr.split("apply --session ")[1].split()[0]
    listed = subprocess.run(
        [AGENTVISOR, "changes"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert session in listed.stdout and ".git/objects/info/alternates" in listed.stdout
    subprocess.run(
        [AGENTVISOR, "apply", "--session", session],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert (repo / ".git/objects/info/alternates").read_text() == "/tmp/elsewhere/objects\n"


# -- more of the host-run class, each with its control --------------------------------------


def test_a_nested_repositorys_hook_planted_by_exec_never_runs(repo, tmp_path, env):
    marker = tmp_path / "HOOK-RAN"
    r = exec_script(repo, env, NESTED_HOOK.format(marker=marker))
    assert "probe-ran" in r.stdout and r.returncode == 0, r.stderr
    assert "sub/.git" in r.stderr and "held for a person" in r.stderr
    assert not (repo / "sub" / ".git").exists()
    users_git(repo / "sub", "commit", "-q", "--allow-empty", "-m", "user")
    assert not marker.exists()


def test_control_in_direct_mode_the_nested_hook_runs_at_the_users_commit(repo, tmp_path, env):
    marker = tmp_path / "HOOK-RAN"
    r = exec_script(repo, env, NESTED_HOOK.format(marker=marker), *direct(tmp_path))
    assert r.returncode == 0, r.stderr
    users_git(repo / "sub", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q",
              "--allow-empty", "-m", "user")  # fmt: skip
    assert marker.exists()


def test_an_agentvisor_yaml_at_depth_written_by_exec_never_reaches_the_workspace(
    repo, tmp_path, env
):
    r = exec_script(repo, env, DEEP_CONFIG)
    assert "probe-ran" in r.stdout and r.returncode == 0, r.stderr
    assert "app/agentvisor.yaml" in r.stderr
    assert (repo / "app").is_dir() and not (repo / "app" / "agentvisor.yaml").exists()


def test_control_in_direct_mode_exec_writes_an_agentvisor_yaml_at_depth(repo, tmp_path, env):
    r = exec_script(repo, env, DEEP_CONFIG, *direct(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (repo / "app" / "agentvisor.yaml").is_file()


def test_an_alternates_file_planted_by_exec_is_held(repo, tmp_path, env):
    r = exec_script(repo, env, ALTERNATES)
    assert "probe-ran" in r.stdout and r.returncode == 0, r.stderr
    assert ".git/objects/info/alternates" in r.stderr
    assert not (repo / ".git" / "objects" / "info" / "alternates").exists()


def test_control_in_direct_mode_exec_writes_the_alternates_file(repo, tmp_path, env):
    r = exec_script(repo, env, ALTERNATES, *direct(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (repo / ".git" / "objects" / "info" / "alternates").is_file()


# -- modes and ordinary edits ---------------------------------------------------------------


def test_ordinary_edits_are_applied_and_recorded_quietly(repo, tmp_path, env):
    r = exec_script(repo, env, "echo more >> README.md; rm -f gone; mkdir -p d; echo x > d/f\n")
    assert (r.returncode, r.stderr) == (0, "")
    assert (repo / "README.md").read_text() == "hello\nmore\n"
    assert (repo / "d" / "f").read_text() == "x\n"
    log = subprocess.run(
        [AGENTVISOR, "log", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert '"decision": "apply"' in log.stdout and "README.md" in log.stdout, log.stderr
    # Nothing waits, so nothing of the run's changeset is kept (its undo data is).
    store = Changesets(repo, root=Path(env["HOME"], ".local", "state", "agentvisor", "changes"))
    assert store.sessions() == [] and len(store.applied()) == 1


def test_review_mode_holds_every_change_of_an_exec(repo, tmp_path, env):
    review = operator_config(tmp_path, "workspace: {mode: review}\n")
    r = exec_script(repo, env, "echo more >> README.md\n", "--config", str(review))
    assert r.returncode == 0 and "README.md" in r.stderr and "held" in r.stderr, r.stderr
    assert (repo / "README.md").read_text() == "hello\n"


def test_other_backends_write_directly_as_before_and_say_so(repo, tmp_path, env):
    r = exec_script(repo, env, "echo more >> README.md\n", "--backend", "local")
    assert r.returncode == 0, r.stderr
    assert "workspace.mode auto needs the bwrap sandbox" in r.stderr
    assert (repo / "README.md").read_text() == "hello\nmore\n"
    # A mode the operator chose is refused rather than quietly not kept.
    chosen = operator_config(tmp_path, "workspace: {mode: auto}\n")
    r = exec_script(repo, env, "echo more >> README.md\n", "--backend", "local", "--config",
                    str(chosen))  # fmt: skip
    assert r.returncode == 125 and "workspace.mode: direct" in r.stderr, r.stderr
    assert (repo / "README.md").read_text() == "hello\nmore\n"


# A directory git takes for a bare repository, whose config runs a command at the user's
# next `git fetch` there.
EMBEDDED_BARE = r"""
mkdir -p bare/objects bare/refs
echo 'ref: refs/heads/main' > bare/HEAD
cat > bare/config <<'X'
[protocol "ext"]
allow = always
[remote "origin"]
url = ext::sh -c touch% {marker}
X
echo probe-ran
"""


def test_an_embedded_bare_repository_planted_by_exec_runs_nothing(repo, tmp_path, env):
    marker = tmp_path / "PLANTED-CODE-RAN"
    r = exec_script(repo, env, EMBEDDED_BARE.format(marker=marker))
    assert "probe-ran" in r.stdout and "bare/HEAD" in r.stderr, r.stderr
    assert not (repo / "bare" / "HEAD").exists()
    users_git(repo / "bare", "fetch", "-q")
    assert not marker.exists()


def test_control_in_direct_mode_the_embedded_bare_repository_runs_its_config(repo, tmp_path, env):
    marker = tmp_path / "PLANTED-CODE-RAN"
    r = exec_script(repo, env, EMBEDDED_BARE.format(marker=marker), *direct(tmp_path))
    assert r.returncode == 0, r.stderr
    users_git(repo / "bare", "fetch", "-q")
    assert marker.exists()


def test_an_odd_git_head_is_held_and_a_branch_switch_applied(repo, tmp_path, env):
    r = exec_script(repo, env, "git checkout -q -b feature\n")
    assert (r.returncode, r.stderr) == (0, "")
    assert (repo / ".git" / "HEAD").read_text() == "ref: refs/heads/feature\n"
    r = exec_script(repo, env, "echo '../../elsewhere' > .git/HEAD\n")
    assert ".git/HEAD" in r.stderr and "held" in r.stderr, r.stderr
    assert (repo / ".git" / "HEAD").read_text() == "ref: refs/heads/feature\n"


@pytest.fixture
def with_bare(repo: Path) -> Path:
    """The user keeps a bare mirror in the workspace."""
    subprocess.run([GIT, "init", "-q", "--bare", str(repo / "mirror.git")], check=True)
    return repo / "mirror.git"


def test_the_config_of_a_bare_repository_in_the_workspace_is_held(repo, tmp_path, env, with_bare):
    marker = tmp_path / "PLANTED-CODE-RAN"
    script = EMBEDDED_BARE.format(marker=marker).replace("bare/", "mirror.git/")
    r = exec_script(repo, env, script)
    assert "mirror.git/config" in r.stderr and "held" in r.stderr, r.stderr
    assert "ext::" not in (with_bare / "config").read_text()
    users_git(with_bare, "fetch", "-q")
    assert not marker.exists()


def test_control_in_direct_mode_the_bare_repositorys_config_runs(repo, tmp_path, env, with_bare):
    marker = tmp_path / "PLANTED-CODE-RAN"
    script = EMBEDDED_BARE.format(marker=marker).replace("bare/", "mirror.git/")
    r = exec_script(repo, env, script, *direct(tmp_path))
    assert r.returncode == 0, r.stderr
    users_git(with_bare, "fetch", "-q")
    assert marker.exists()


def test_a_background_process_ends_with_the_run_and_writes_nothing_after_the_settle(
    repo, tmp_path, env
):
    script = "(sleep 1; echo late > late.txt) &\necho now > now.txt\n"
    r = exec_script(repo, env, script)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert (repo / "now.txt").read_text() == "now\n"
    time.sleep(2)
    assert not (repo / "late.txt").exists()
    # Control: in the same shell, waited for, the late write lands and is applied.
    r = exec_script(repo, env, script + "wait\n")
    assert (repo / "late.txt").read_text() == "late\n", r.stderr


def test_a_new_bare_repository_holds_its_config_with_its_head(repo, tmp_path, env):
    marker = tmp_path / "PLANTED-CODE-RAN"
    r = exec_script(
        repo,
        env,
        f"git init -q --bare new.git\n{EMBEDDED_BARE}".format(marker=marker).replace(
            "bare/", "new.git/"
        ),
    )
    assert "probe-ran" in r.stdout and "held" in r.stderr, r.stderr
    assert not (repo / "new.git" / "HEAD").exists()
    assert not (repo / "new.git" / "config").exists()
    # A person who applies the HEAD alone still gets no planted config.
    session = r.stderr.split("apply --session ")[1].split()[0]
    subprocess.run(
        [AGENTVISOR, "apply", "--session", session, "new.git/HEAD"],
        cwd=repo, env=env, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    users_git(repo / "new.git", "fetch", "-q")
    assert not marker.exists()


def test_ordinary_git_work_in_exec_is_applied_without_a_hold(repo, tmp_path, env):
    commit = "git -c user.name=a -c user.email=a@example.com commit -q --allow-empty -m {}\n"
    script = commit.format("one") + "git checkout -q -b feature\n" + commit.format("two")
    r = exec_script(repo, env, script)
    assert (r.returncode, r.stderr) == (0, "")
    log = subprocess.run([GIT, "-C", str(repo), "log", "--format=%s"], capture_output=True)
    assert log.stdout.decode().split() == ["two", "one"]
    assert (repo / ".git" / "HEAD").read_text() == "ref: refs/heads/feature\n"
    assert (repo / ".git" / "logs" / "HEAD").is_file()
