"""Limits are checked on the running container; a missing one refuses the run."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from agentvisor.errors import LimitNotEnforced, SandboxError
from agentvisor.records import replace
from agentvisor.sandbox.docker import DockerBackend
from agentvisor.sandbox.docker.verify import check_container, host_has_swap, read_kernel_view
from agentvisor.sandbox.env import build_env

from .helpers import config, sandbox, sh, text

root_only = pytest.mark.skipif(os.getuid() != 0, reason="tampering with a cgroup needs root")


def persistent(ws: Path, session: str, **settings: Any) -> DockerBackend:
    cfg = config(persistent=True, **settings)
    env = build_env(os.environ, home=str(Path.home())).env
    return DockerBackend(cfg, ws, env, Path.home(), session=session)


def started(backend: DockerBackend, engine: Any) -> tuple[Any, dict]:
    """The session's container after one run, and its inspect record."""
    assert backend.run(["true"]).ok
    info = engine.inspect_container(backend._container_name())
    return backend._plan([]), info


def test_a_container_that_matches_its_plan_passes(ws: Path, engine: Any) -> None:
    backend = persistent(ws, "verify-ok")
    try:
        plan, info = started(backend, engine)
        view = read_kernel_view(info["State"]["Pid"], info["Id"])
        assert view is not None, "this machine should see the container's init"
        found = check_container(plan, info, [], view, swap_on_host=host_has_swap())
        assert found.unenforced == {} and found.violations == []
    finally:
        backend.close()


def test_engine_reporting_another_limit_is_caught(ws: Path, engine: Any) -> None:
    backend = persistent(ws, "verify-engine")
    try:
        plan, info = started(backend, engine)
        # The plan asks for more than the engine was given: exactly what a dropped or
        # rewritten limit looks like from here.
        asked = replace(plan, pids=plan.pids + 44, memory_bytes=plan.memory_bytes * 2)
        found = check_container(asked, info, [], None, swap_on_host=False)
        assert "the engine reports 256, not 300" in found.unenforced["sandbox.pids"][0]
        assert "sandbox.memory_mb" in found.unenforced
        weakened = copy.deepcopy(info)
        weakened["HostConfig"]["SecurityOpt"] = []
        weakened["HostConfig"]["CapAdd"] = ["SYS_ADMIN"]
        violations = check_container(plan, weakened, [], None, swap_on_host=False).violations
        assert any("no-new-privileges" in v for v in violations), violations
        assert any("seccomp" in v for v in violations), violations
        assert any("SYS_ADMIN" in v for v in violations), violations
    finally:
        backend.close()


@root_only
def test_kernel_without_the_limit_refuses_the_run(ws: Path, engine: Any) -> None:
    backend = persistent(ws, "verify-kernel")
    try:
        _, info = started(backend, engine)
        view = read_kernel_view(info["State"]["Pid"], info["Id"])
        assert view is not None
        # The engine still reports pids 256; the kernel no longer enforces any.
        (view.cgroup["pids"] / "pids.max").write_text("max")
        with pytest.raises(LimitNotEnforced) as err:
            backend.run(["true"])
        message = str(err.value)
        assert "sandbox.pids: not enforced" in message
        assert "the container's cgroup allows any number of processes, not 256" in message
        assert "sandbox.allow_unenforced_limits" in message
        # A refused container is not left behind.
        assert engine.containers(all=True, filters={"name": backend._container_name()}) == []
    finally:
        backend.close()


@root_only
def test_allow_unenforced_limits_runs_and_says_so(ws: Path, engine: Any) -> None:
    backend = persistent(ws, "verify-allowed", allow_unenforced_limits=True)
    try:
        _, info = started(backend, engine)
        view = read_kernel_view(info["State"]["Pid"], info["Id"])
        assert view is not None
        quota = view.cgroup["cpu"] / "cpu.cfs_quota_us"
        if quota.exists():  # cgroup v1
            quota.write_text("-1")
        else:
            (view.cgroup["cpu"] / "cpu.max").write_text("max")
        result = backend.run(["echo", "ran"])
        assert result.stdout == b"ran\n"
        assert b"sandbox.docker.cpus: not enforced" in result.stderr
        assert b"running anyway: sandbox.allow_unenforced_limits is true" in result.stderr
    finally:
        backend.close()


def test_disk_quota_without_driver_support(ws: Path, engine: Any) -> None:
    if engine.info().get("Driver") != "overlay2" or "xfs" in str(engine.info().get("DriverStatus")):
        pytest.skip("this storage driver may support quotas")
    with pytest.raises(LimitNotEnforced) as err:
        sh(ws, "true", docker={"disk_mb": 1024})
    assert "sandbox.docker.disk_mb: cannot be enforced here" in str(err.value)
    allowed = sh(ws, "echo ran", docker={"disk_mb": 1024}, allow_unenforced_limits=True)
    assert allowed.stdout == b"ran\n", text(allowed)
    assert b"sandbox.docker.disk_mb: cannot be enforced here" in allowed.stderr


def test_image_without_a_shell_is_refused_clearly(ws: Path, engine: Any) -> None:
    import io
    import tarfile

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("etc/empty")
        tar.addfile(info, io.BytesIO())
    engine.import_image_from_data(
        data.getvalue(), repository="agentvisor-test-noshell", tag="latest"
    )
    try:
        with pytest.raises(SandboxError) as err:
            sh(ws, "true", docker={"image": "agentvisor-test-noshell:latest"})
        assert "needs /bin/sh" in str(err.value)
    finally:
        engine.remove_image("agentvisor-test-noshell:latest", force=True)


def test_total_disk_quota_is_refused_as_unenforceable(ws: Path) -> None:
    with pytest.raises(LimitNotEnforced, match=r"sandbox\.disk_mb: cannot be enforced here"):
        sandbox(ws, disk_mb=100)
    allowed = sandbox(ws, disk_mb=100, allow_unenforced_limits=True)  # control
    assert any("sandbox.disk_mb" in w for w in allowed.warnings)
