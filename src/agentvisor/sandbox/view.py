"""The host's end of the overlay mount step (``overlay.py``): a changeset to mount over
the workspace, and the descriptor of the view it reports back.

A gateway session keeps the view to let its host-side file tools write through the same
mount; `agentvisor run` only needs the mount. Both start a sandbox with
``Attachment(overlay=channel.overlay)`` and close the channel when it ends.
"""

from __future__ import annotations

import array
import socket

from ..errors import SandboxError
from .base import Overlay


class OverlayChannel:
    """A changeset's ``upper`` and ``work`` directories as an `Overlay`, with the socket
    the mount step reports the view on."""

    def __init__(self, upper: str, work: str) -> None:
        self._host_end, mount_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The launch closes its copy of the mount step's end (it passes it like any fd).
        self.overlay = Overlay(upper=upper, work=work, report_fd=mount_end.detach())

    def receive_view(self, timeout: float = 30.0) -> int:
        """The one ``O_PATH`` descriptor of the mounted view the mount step sends."""
        self._host_end.settimeout(timeout)
        fds = array.array("i")
        try:
            _, ancillary, _, _ = self._host_end.recvmsg(16, socket.CMSG_SPACE(fds.itemsize))
        except OSError as exc:
            raise SandboxError(f"the changeset overlay was not mounted: {exc}") from exc
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: fds.itemsize])
        if not fds:
            raise SandboxError("the changeset overlay was not mounted (see the sandbox's errors)")
        return fds[0]

    def close(self) -> None:
        """Close the host's end (a view sent and not received is closed with it)."""
        self._host_end.close()
