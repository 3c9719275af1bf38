"""`agentvisor exec`: one command in a fresh sandbox, as the CLI, the exec server and the
exec helper run it.

- `request`: `ExecRequest`, everything one run takes (the CLI builds it from its
  arguments, the server decodes it from the wire).
- `run`: `run(request, ...)`, the one function that does the work: config, policy,
  sandbox.
- `proto`: the wire format between the CLI and an exec server.
- `server`: the exec server a gateway (or the exec helper) serves on a Unix socket.
- `helper`: the exec helper a standalone `agentvisor exec` leaves behind.
- `client`: the import-free client: hand a request to a server, start or stop the helper.

Nothing is imported here: the client runs on every `agentvisor exec` start.
"""
