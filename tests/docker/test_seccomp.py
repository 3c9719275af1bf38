"""agentvisor's seccomp profile refuses everything Docker's default refuses, and more."""

from __future__ import annotations

import errno
import json
import os
import textwrap
from typing import Any

import pytest

from agentvisor.sandbox.docker.seccomp import profile_json

# Every syscall number, called with all-ones arguments in a child: seccomp decides before
# the kernel looks at the arguments, so a refused call fails at once with the profile's
# errno, and an allowed one fails (harmlessly) on its bad arguments.
PROBE = textwrap.dedent("""
    import ctypes, json, os, signal
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    M = ctypes.c_long(-1)
    out = {}
    for nr in range(460):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            signal.alarm(1)
            me = os.getpid()
            ctypes.set_errno(0)
            ret = libc.syscall(ctypes.c_long(nr), M, M, M, M, M, M)
            e = ctypes.get_errno()
            if libc.syscall(39) == me:  # not a child that fork/clone/vfork made
                os.write(w, f"{ret} {e}".encode())
            os._exit(0)
        os.close(w)
        data = os.read(r, 100).decode()
        os.close(r)
        os.waitpid(pid, 0)
        ret, _, e = data.partition(" ")
        out[nr] = int(e) if data and int(ret) == -1 else (0 if data else "killed")
    print(json.dumps(out))
""")
BLOCKED = (errno.EPERM, errno.ENOSYS)


def probe(engine: Any, image: str, security: list[str]) -> dict[int, Any]:
    host_config = engine.create_host_config(
        cap_drop=["ALL"],
        network_mode="none",
        init=True,
        security_opt=["no-new-privileges", *security],
    )
    created = engine.create_container(
        image,
        command=["python3", "-c", PROBE],
        user="1000:1000",
        host_config=host_config,
        labels={"agentvisor.managed": "1"},
    )
    try:
        engine.start(created["Id"])
        assert engine.wait(created["Id"], timeout=120)["StatusCode"] == 0
        return {int(k): v for k, v in json.loads(engine.logs(created["Id"], stderr=False)).items()}
    finally:
        engine.remove_container(created["Id"], force=True)


@pytest.mark.slow
def test_profile_is_at_least_as_strict_as_dockers_default(engine: Any, image: str) -> None:
    default = probe(engine, image, [])
    ours = probe(engine, image, [f"seccomp={profile_json()}"])
    weaker = [nr for nr, result in default.items() if result in BLOCKED and ours[nr] not in BLOCKED]
    assert weaker == [], f"syscalls Docker's default refuses but agentvisor allows: {weaker}"
    stricter = [
        nr for nr, result in ours.items() if result in BLOCKED and default[nr] not in BLOCKED
    ]
    # The control that the probe tells an allowed call from a refused one: ptrace (101 on
    # x86_64), which Docker's default allows and agentvisor refuses.
    assert stricter, "the probe saw no difference at all"
    if os.uname().machine == "x86_64":
        assert 101 in stricter, stricter
