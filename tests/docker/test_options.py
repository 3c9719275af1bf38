"""sandbox.docker.extra_args: what weakens isolation is refused, naming the setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentvisor.errors import ConfigError
from agentvisor.sandbox.docker.options import parse_extra_args

from ..conftest import run_cli
from .helpers import CLI_ENV, py, sandbox

REFUSED = [
    (["--privileged"], "--privileged refused"),
    (["--cap-add", "SYS_ADMIN"], "--cap-add SYS_ADMIN refused"),
    (["--cap-add=ALL"], "--cap-add ALL refused"),
    (["--cap-add", "SYS_PTRACE"], "--cap-add SYS_PTRACE refused"),
    (["--security-opt", "seccomp=unconfined"], "--security-opt seccomp=unconfined refused"),
    (["--security-opt=seccomp=/tmp/profile.json"], "seccomp=/tmp/profile.json refused"),
    (["--security-opt", "apparmor=unconfined"], "apparmor=unconfined refused"),
    (["--security-opt", "apparmor:unconfined"], "apparmor:unconfined refused"),
    (["--security-opt", "no-new-privileges=false"], "no-new-privileges=false refused"),
    (["--security-opt", "label=disable"], "label=disable refused"),
    (["--network", "host"], "--network=host refused"),
    (["--net=bridge"], "--net=bridge refused"),
    (["--network", "container:abc"], "--network=container:abc refused"),
    (["--pid=host"], "--pid=host refused: it shares the host's namespace"),
    (["--ipc", "host"], "--ipc=host refused"),
    (["--uts", "host"], "--uts=host refused"),
    (["--userns=host"], "--userns=host refused"),
    (["--pid", "container:x"], "other container's namespace"),
    (["--device", "/dev/sda"], "--device refused"),
    (["--gpus", "all"], "--gpus refused"),
    (["--cgroup-parent", "/"], "--cgroup-parent refused"),
    (["--sysctl", "kernel.x=1"], "--sysctl refused"),
    (["--env", "TOKEN=x"], "--env refused: the environment comes from sandbox.env_passthrough"),
    (["--memory", "1g"], "set sandbox.memory_mb instead"),
    (["--volumes-from", "other"], "--volumes-from refused"),
    (["--mount", "type=volume,source=v,target=/v"], "only type=bind"),
    (["--frobnicate"], "--frobnicate is not an option agentvisor accepts"),
    (["ubuntu"], "'ubuntu' is not an option"),
]


@pytest.mark.parametrize(("args", "message"), REFUSED)
def test_weakening_options_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_extra_args(["--add-host", "a:1.2.3.4", *args], uid=1000)
    assert "sandbox.docker.extra_args[2]" in str(err.value), err.value
    assert message in str(err.value), err.value


def test_root_user_is_refused_when_non_root_is_configured() -> None:
    with pytest.raises(
        ConfigError,
        match=r"extra_args\[0\]: --user root refused: it runs as "
        r"root while sandbox.docker.user is the non-root uid",
    ):
        parse_extra_args(["--user", "root"], uid=1000)
    with pytest.raises(ConfigError, match="--user 0:0 refused: it runs as root"):
        parse_extra_args(["--user=0:0"], uid=1000)


def test_harmless_options_are_kept() -> None:
    out = parse_extra_args(
        [
            "--cap-add",
            "chown",
            "--cap-add=CAP_SETUID",
            "--add-host",
            "db:10.0.0.5",
            "--ulimit",
            "nofile=1024:2048",
            "--shm-size",
            "64m",
            "--security-opt",
            "apparmor=my-profile",
            "--label",
            "team=x",
            "-v",
            "/srv/data:/data",
            "--mount",
            "type=bind,source=/srv/a,target=/a,readonly",
            "--init",
            "--rm",
            "--network",
            "none",
            "--security-opt",
            "no-new-privileges",
        ],
        uid=1000,
    )
    assert out.cap_add == ["CHOWN", "SETUID"]
    assert out.extra_hosts == {"db": "10.0.0.5"} and out.ulimits == {"nofile": (1024, 2048)}
    assert out.shm_size_mb == 64 and out.apparmor == "my-profile"
    assert out.mounts == [(13, "/srv/data:/data"), (15, "/srv/a:/a:ro")]


def test_protected_path_or_docker_socket_as_extra_mount_is_refused(ws: Path) -> None:
    for spec, protected in (
        ("/var/run/docker.sock:/sock", "/run/docker.sock"),
        ("/run/containerd:/c", "/run/containerd"),
        (f"{Path.home()}/.ssh:/keys", ".ssh"),
    ):
        with pytest.raises(ConfigError) as err:
            sandbox(ws, docker={"extra_args": ["--add-host", "a:1.2.3.4", "-v", spec]})
        message = str(err.value)
        assert message.startswith("sandbox.docker.extra_args[2]: mounting"), message
        assert protected in message, message
    with pytest.raises(ConfigError, match=r"sandbox.mounts\[0\].*protected path"):
        sandbox(ws, mounts=["/var/run/docker.sock:/sock"])


def test_added_capability_never_becomes_effective(tmp_path: Path, image: str) -> None:
    # Commands never run as uid 0 (containers share the host's uids), and only uid 0
    # gets the bounding set as effective capabilities.
    ws = tmp_path / "w"
    ws.mkdir()
    probe = (
        "s = dict(l.split(':', 1) for l in open('/proc/self/status'));"
        " print(s['CapBnd'].strip(), s['CapEff'].strip())"
    )
    plain = py(ws, probe, docker={"user": "1000:1000"})
    chown = py(ws, probe, docker={"user": "1000:1000", "extra_args": ["--cap-add", "CHOWN"]})
    assert plain.stdout.split() == [b"0000000000000000", b"0000000000000000"]
    # Control: the option does apply (to the bounding set), and still nothing is effective.
    assert chown.stdout.split() == [b"0000000000000001", b"0000000000000000"]


def test_cli_refuses_with_the_setting_named(ws: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "agentvisor.yaml"
    cfg.write_text("sandbox:\n  docker:\n    extra_args: ['--privileged']\n")
    result = run_cli(
        "exec",
        "--config",
        str(cfg),
        "--backend",
        "docker",
        "--workspace",
        str(ws),
        "--",
        "true",
        env=CLI_ENV,
    )
    assert result.returncode == 125
    assert "sandbox.docker.extra_args[0]: --privileged refused" in result.stderr
    if os.getuid() == 0:
        assert not (ws / "anything").exists()
