"""The process that keeps a persistent sandbox alive and starts commands inside it.

It runs *inside* the sandbox (already in its namespaces, with no capabilities and under
the seccomp filter), so it has no more rights than the commands it starts. It is the
sandbox's pid 1: it reaps orphans, and when it exits (the gateway closed the socket or
died) the kernel ends every process in the sandbox. It talks to
the gateway over one inherited SOCK_SEQPACKET socket — there is no socket file a
sandboxed command could reach — with JSON messages:

    host -> spawner   {"op": "spawn", "id": N, "argv": [...], "cwd": ..., "env": {...}}
                      with stdin, stdout and stderr passed as SCM_RIGHTS file descriptors
    host -> spawner   {"op": "kill", "id": N}      (SIGKILL to the command's process group)
    spawner -> host   {"op": "started", "id": N, "pid": P} | {"op": "error", "id": N, ...}
    spawner -> host   {"op": "exit", "id": N, "status": S}   (S = 128 + signal when killed)

It is out of reach of the commands it starts, although they share its uid: it makes
itself non-dumpable first (so ``/proc/1/mem``, ``/proc/1/environ`` and ptrace-style access
need a capability nobody inside has), the seccomp filter refuses ``pidfd_getfd``, which
would otherwise copy its control socket out of it, and it catches no signal but SIGCHLD
(the kernel delivers a pid 1 only the signals it catches from inside its namespace).

Standalone on purpose: it is executed by the sandbox's python3 with ``-I -S`` and may
import nothing but the standard library.
"""

import array
import contextlib
import json
import os
import select
import signal
import socket
import sys

MAX_MESSAGE = 1 << 20
PR_SET_DUMPABLE = 4


def receive(sock):
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


def send(sock, message):
    sock.send(json.dumps(message).encode())


def spawn(message, fds):
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            os.closerange(3, 65536)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.chdir(message["cwd"])
            os.execvpe(message["argv"][0], message["argv"], message["env"])
        except OSError as exc:
            os.write(2, f"{message['argv'][0]}: {exc.strerror}\n".encode())
            os._exit(127)
        os._exit(127)
    for fd in fds:
        os.close(fd)
    return pid


def not_dumpable():
    """prctl(PR_SET_DUMPABLE, 0); the commands it starts become dumpable again at exec."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def main():
    not_dumpable()
    # Python catches SIGINT (KeyboardInterrupt); a pid 1 gets from its own namespace only
    # the signals it catches, so `kill -INT 1` by a command would end the whole session.
    # SIG_DFL, not SIG_IGN: the commands it starts inherit an ignored signal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    control = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(control.fileno(), False)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    running = {}  # pid -> request id
    send(control, {"op": "ready", "pid": os.getpid()})
    # poll, not select: the control descriptor keeps the gateway's number, which is past
    # select's limit of 1024 when the gateway is busy.
    poller = select.poll()
    poller.register(control, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        readable = [fd for fd, _ in poller.poll()]
        if wake_r in readable:
            os.read(wake_r, 512)
        while True:  # as pid 1, orphans are ours to reap too
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in running:
                code = os.waitstatus_to_exitcode(status)
                send(
                    control,
                    {
                        "op": "exit",
                        "id": running.pop(pid),
                        "status": 128 - code if code < 0 else code,
                    },
                )
        if control.fileno() in readable:
            data, fds = receive(control)
            if not data:
                return  # the gateway went away: end the sandbox
            message = json.loads(data)
            if message["op"] == "spawn":
                try:
                    pid = spawn(message, fds)
                except OSError as exc:
                    send(control, {"op": "error", "id": message["id"], "error": str(exc)})
                    continue
                running[pid] = message["id"]
                send(control, {"op": "started", "id": message["id"], "pid": pid})
            elif message["op"] == "kill":
                for pid, request in list(running.items()):
                    if request == message["id"]:
                        with contextlib.suppress(OSError):
                            os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
