"""The docker backend: each command in a hardened container, through the Engine API.

One module per concern:

- ``backend.py``: `DockerBackend`, the `Backend` implementation (containers, exec, streams);
- ``spec.py``: the container's shape as a pure function of the config;
- ``options.py``: the vetted ``sandbox.docker.extra_args``;
- ``seccomp.py``: the seccomp profile, stricter than Docker's default;
- ``verify.py``: every limit and security setting checked on the running container;
- ``image.py``: the default image, built from this machine's files
  (``python -I -m agentvisor.sandbox.docker.image``).
"""

from __future__ import annotations

from .backend import DockerBackend

__all__ = ["DockerBackend"]
