"""wasmtime, set up once per process, and one call of one tool function.

Each call gets a fresh store and instance (no state survives between calls) with:

- WASI preview 1 with only the granted directories preopened (read-only unless write
  was granted), only the granted environment variables, no arguments, no stdin or
  stdout, stderr kept (its first 4 KiB) for error messages, and no sockets;
- a memory limit (``memory.grow`` fails past it, and a module that needs more at start
  does not instantiate), one memory, one instance, bounded tables;
- a wall-clock limit by epoch interruption: a clock thread advances the engine's epoch
  every `TICK` seconds while any call runs, and the call traps at its deadline wherever
  it is in the tool's code;
- an output limit on the result.

A trap, an exit, a broken ABI or a limit becomes a `ToolFailed` (or `LimitExceeded`)
that says what happened; the process carries on.

The ABI (docs/wasm.md): the module exports ``memory``, ``av_alloc(size) -> ptr`` and,
per function, ``NAME(ptr, len) -> i64`` returning ``(ptr << 32) | len`` of a JSON result.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..records import Declared, Default
from .errors import LimitExceeded, ManifestError, ToolFailed
from .grants import Preopen
from .hostfuncs import IMPORT_MODULE, SIGNATURES, HostCalls, current, define, read_guest
from .manifest import Manifest

TICK = 0.01  # seconds per epoch: the precision of the time limit
TABLE_ELEMENTS = 100_000
TABLES = 4
STDERR_KEEP = 4096
WASI_MODULE = "wasi_snapshot_preview1"
_MASK = 0xFFFFFFFF


class CallLimits(Declared):
    memory_bytes: int
    timeout: float
    output_bytes: int


class CallSetup(Declared):
    """Everything one call's instance is given."""

    limits: CallLimits
    host: HostCalls
    preopens: list[Preopen] = Default(factory=list)
    env: list[tuple[str, str]] = Default(factory=list)


class CompiledTool(Declared):
    name: str
    pre: Any  # wasmtime.InstancePre: the module with its imports resolved


class Runtime:
    """One wasmtime engine and linker for every tool of the process."""

    _shared: Runtime | None = None
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls) -> Runtime:
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def __init__(self) -> None:
        import wasmtime

        config = wasmtime.Config()
        config.epoch_interruption = True
        # Proposals whose memories the store's limits would not cover in the same way.
        config.wasm_threads = False
        config.shared_memory = False
        config.wasm_memory64 = False
        config.wasm_multi_memory = False
        self.engine = wasmtime.Engine(config)
        self._linker = wasmtime.Linker(self.engine)
        self._linker.define_wasi()
        define(self._linker)
        self._clock = _EpochClock(self.engine)

    def compile(self, manifest: Manifest, module_bytes: bytes) -> CompiledTool:
        """Compile and check a module against its manifest; `ManifestError` says why not."""
        import wasmtime

        try:
            module = wasmtime.Module(self.engine, module_bytes)
        except wasmtime.WasmtimeError as exc:
            raise ManifestError(
                f"{manifest.name}: the module does not load: {_first_line(exc)}"
            ) from None
        check_abi(module, manifest)
        try:
            pre = self._linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            raise ManifestError(
                f"{manifest.name}: the module imports something the host "
                f"does not provide: {_first_line(exc)}"
            ) from None
        return CompiledTool(manifest.name, pre)

    def run(self, tool: CompiledTool, function: str, payload: bytes, setup: CallSetup) -> bytes:
        """Run one function once; its result's bytes, or `ToolFailed` / `LimitExceeded`."""
        import wasmtime

        limits = setup.limits
        store = wasmtime.Store(self.engine)
        store.set_limits(
            memory_size=limits.memory_bytes,
            table_elements=TABLE_ELEMENTS,
            instances=1,
            tables=TABLES,
            memories=1,
        )
        stderr = _StderrSink(STDERR_KEEP)
        wasi = wasmtime.WasiConfig()
        wasi.argv = [tool.name]
        wasi.env = setup.env
        stderr.attach(wasi)
        for preopen in setup.preopens:
            wasi.preopen_dir(preopen.host, preopen.guest, preopen.writable)
        store.set_wasi(wasi)
        store.set_epoch_deadline(max(1, math.ceil(limits.timeout / TICK)))
        failure = _Failure(tool.name, limits, stderr)
        token = current.set(setup.host)
        memory = None
        try:
            with self._clock.running():
                instance = tool.pre.instantiate(store)
                exports = instance.exports(store)
                memory = exports["memory"]
                if "_initialize" in exports:
                    exports["_initialize"](store)
                ptr = exports["av_alloc"](store, len(payload)) & _MASK
                if ptr == 0 or ptr + len(payload) > memory.data_len(store):
                    raise LimitExceeded(
                        f"{tool.name}: no room for the arguments "
                        f"({len(payload)} bytes) within its memory limit of "
                        f"{limits.memory_bytes >> 20} MB"
                    )
                memory.write(store, payload, ptr)
                packed = exports[function](store, ptr, len(payload))
        except wasmtime.ExitTrap as exc:
            raise failure.exited(exc.code) from None
        except wasmtime.Trap as trap:
            raise failure.trapped(trap, store, memory) from None
        except wasmtime.WasmtimeError as exc:
            raise failure.error(exc) from None
        finally:
            current.reset(token)
            stderr.close()
        out_ptr, out_len = (packed >> 32) & _MASK, packed & _MASK
        if out_len > limits.output_bytes:
            raise LimitExceeded(
                f"{tool.name}: its result is {out_len} bytes, more than its "
                f"output limit of {limits.output_bytes} bytes"
            )
        try:
            return read_guest(store, memory, out_ptr, out_len, limits.output_bytes, "its result")
        except ValueError as exc:
            raise ToolFailed(f"{tool.name}: broke the ABI: {exc}") from None


class _Failure(Declared):
    """Turns what wasmtime raised into a message a person (and the agent) can act on."""

    tool: str
    limits: CallLimits
    stderr: _StderrSink

    def exited(self, code: int) -> ToolFailed:
        return ToolFailed(
            f"{self.tool}: exited with status {code} instead of returning a "
            f"result{self.stderr.note()}"
        )

    def trapped(self, trap: Any, store: Any, memory: Any) -> ToolFailed:
        import wasmtime

        code = trap.trap_code
        if code == wasmtime.TrapCode.INTERRUPT:
            return LimitExceeded(
                f"{self.tool}: stopped at its time limit of {self.limits.timeout:g} s"
            )
        if code == wasmtime.TrapCode.STACK_OVERFLOW:
            return ToolFailed(f"{self.tool}: ran out of stack (recursion too deep)")
        what = str(code.name).lower().replace("_", " ") if code else _first_line(trap)
        full = memory is not None and memory.data_len(store) + 65536 > self.limits.memory_bytes
        note = (
            (f"; it had used all of its memory limit of {self.limits.memory_bytes >> 20} MB")
            if full
            else ""
        )
        return ToolFailed(f"{self.tool}: trapped ({what}){note}{self.stderr.note()}")

    def error(self, exc: Exception) -> ToolFailed:
        text = _first_line(exc)
        if "memory" in text and "limit" in text:
            return LimitExceeded(
                f"{self.tool}: needs more memory than its limit of "
                f"{self.limits.memory_bytes >> 20} MB ({text})"
            )
        return ToolFailed(f"{self.tool}: {text}{self.stderr.note()}")


def check_abi(module: Any, manifest: Manifest) -> None:
    """The exports and imports the ABI requires, checked before anything runs."""
    import wasmtime

    name = manifest.name
    exports = {e.name: e.type for e in module.exports}
    memory = exports.get("memory")
    if not isinstance(memory, wasmtime.MemoryType):
        raise ManifestError(f"{name}: the module must export its memory as 'memory'")
    start_bytes = memory.limits.min * 65536
    if start_bytes > manifest.limits.memory_mb << 20:
        raise ManifestError(
            f"{name}: the module needs {start_bytes >> 20} MB at start, more "
            f"than its limits.memory_mb of {manifest.limits.memory_mb}"
        )
    wanted: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {"av_alloc": (("i32",), ("i32",))}
    wanted.update({f.name: (("i32", "i32"), ("i64",)) for f in manifest.functions})
    for export, signature in wanted.items():
        if _signature(exports.get(export)) != signature:
            raise ManifestError(
                f"{name}: the module must export {export} with parameters "
                f"{signature[0]} and result {signature[1]} (docs/wasm.md)"
            )
    if "_start" in exports and "_initialize" not in exports:
        raise ManifestError(
            f"{name}: the module is a command (it exports _start); build it "
            "as a library, e.g. clang -mexec-model=reactor"
        )
    for imp in module.imports:
        if imp.module == WASI_MODULE:
            continue
        if (
            imp.module == IMPORT_MODULE
            and imp.name in SIGNATURES
            and _signature(imp.type) == SIGNATURES[imp.name]
        ):
            continue
        raise ManifestError(
            f"{name}: the module imports {imp.module}.{imp.name}, which the "
            f"host does not provide (only {WASI_MODULE}.* and "
            f"{IMPORT_MODULE}.{', '.join(SIGNATURES)})"
        )


def _signature(ty: Any) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    import wasmtime

    if not isinstance(ty, wasmtime.FuncType):
        return None
    return tuple(str(p) for p in ty.params), tuple(str(r) for r in ty.results)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", "") or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _StderrSink:
    """A tool's stderr: a pipe drained by a thread of ours, keeping the first bytes for
    error messages (and dropping the rest, so a chatty tool never blocks or fills memory).

    Not `WasiConfig.stderr_custom`: wasmtime writes a guest's stderr from its own tokio
    threads and calls that Python callback there, and its finalizer whenever it drops the
    stream, which can be at process exit. A foreign thread entering Python while the
    interpreter finalizes is ended with ``pthread_exit``, which Rust cannot unwind through:
    `agentvisor mcp` died with SIGABRT ("panic in a function that cannot unwind") at exit
    after Wasm tools ran. With a pipe, wasmtime's threads only ever write to a descriptor.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._data = bytearray()
        self._read, self._write = os.pipe()
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(
            target=self._drain, daemon=True, name="agentvisor-wasm-stderr"
        )
        self._thread.start()
        self._closed = False

    def attach(self, wasi: Any) -> None:
        """Point the guest's stderr at the pipe; wasmtime opens its own descriptor of it."""
        try:
            wasi.stderr_file = f"/proc/self/fd/{self._write}"
        except Exception:
            self.close()
            raise
        finally:
            os.close(self._write)

    def _drain(self) -> None:
        while True:
            ready = select.select([self._read, self._wake_read], [], [])[0]
            if self._wake_read in ready:
                return  # close() reads what is left
            if not self._take(os.read(self._read, 65536)):
                return  # wasmtime closed its end: nothing more can come

    def _take(self, chunk: bytes) -> bool:
        self._data += chunk[: self._limit - len(self._data)]
        return bool(chunk)

    def close(self) -> None:
        """Stop draining (what is already in the pipe is kept); the pipe is closed."""
        if self._closed:
            return
        self._closed = True
        os.write(self._wake_write, b"x")
        self._thread.join()
        os.set_blocking(self._read, False)
        with contextlib.suppress(BlockingIOError):
            while self._take(os.read(self._read, 65536)):
                pass
        for fd in (self._read, self._wake_read, self._wake_write):
            os.close(fd)

    def note(self) -> str:
        self.close()  # everything the tool wrote before it ended
        text = self._data.decode("utf-8", "replace").strip()
        return f"; its stderr: {text}" if text else ""


class _EpochClock:
    """Advances an engine's epoch every `TICK` seconds while at least one call runs."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._running = 0
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self._wake:
            self._running += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._tick, daemon=True, name="agentvisor-wasm-clock"
                )
                self._thread.start()
            self._wake.notify()
        try:
            yield
        finally:
            with self._wake:
                self._running -= 1

    def _tick(self) -> None:
        while True:
            with self._wake:
                while not self._running:
                    self._wake.wait()
            time.sleep(TICK)
            self._engine.increment_epoch()
