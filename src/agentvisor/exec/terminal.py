"""The caller's terminal around one `agentvisor exec` run.

A sandboxed command writes to the caller's terminal, and a terminal obeys more than text:
it sets its window title (OSC 0/1/2), copies to the clipboard (OSC 52), resizes or moves
its window (CSI t), takes DCS/APC/PM/SOS strings (graphics, tmux passthrough, DECRQSS),
and answers queries (device status, attributes, modes) by typing the answer into the
input of whatever reads next, the caller's shell once the run is over. Its modes (echo,
canonical input) and window size outlive the command too.

`TerminalGuard` therefore, for one run:
- remembers the modes (termios) and window size of every terminal among the caller's
  stdin/stdout/stderr and puts them back afterwards;
- unless the caller asked for raw output, gives the command a pseudo-terminal in place of
  each output terminal (so it still sees a terminal: colours, widths, full-screen programs
  work) and copies what it writes to the real one through `OutputFilter`, which keeps text,
  colours (SGR) and cursor and screen control, and drops the rest; at the end it switches
  off modes the command left on (mouse and focus reports, bracketed paste, the alternate
  screen) and shows the cursor it hid; and gives it a terminal stdin opened anew for reading
  only (the caller's is usually open for writing too: a way to the screen past the filter).

The filter is written here by hand: libraries either strip every escape (colours too) or
emulate a whole screen (pyte); neither passes a byte stream through with a policy.
"""

from __future__ import annotations

import contextlib
import os
import re

TYPE_CHECKING = False  # typing costs milliseconds on every `exec`
if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence
    from types import TracebackType
    from typing import Any

ESC = 0x1B
_CAN, _SUB, _ENQ, _BEL = 0x18, 0x1A, 0x05, 0x07
# ESC followed by these opens a string (DCS, SOS, OSC, PM, APC, and screen's title ESC k):
# the whole string goes, up to its terminator.
_STRINGS = frozenset(b"PX]^_k")
# CSI finals without a parameter prefix that only move, erase, scroll or colour text.
_CSI_PLAIN = frozenset(b"@ABCDEFGHIJKLMPSTXZ`abdefgmrsu")
# ANSI modes (CSI Pm h/l) that change text only: insert (4) and newline (20). Not 2 (KAM),
# which locks the keyboard.
_ANSI_MODES = frozenset({b"4", b"20"})
# DEC private modes (CSI ? Pm h/l) a command may set, each with the setting it is put back
# to at the end of a run that left it otherwise: those that make the terminal type into the
# input (mouse reports 9, 1000-1006, 1015, 1016; focus reports 1004; bracketed paste 2004),
# the alternate screen, the cursor keys and keypad (1, 66), reverse video (5), origin (6),
# autowrap (7), synchronized output (2026) and the visible cursor (25).
_DEC_MODES_RESET = {mode: ord("l") for mode in b"9 1000 1001 1002 1003 1004 1005 1006".split()}
_DEC_MODES_RESET |= {mode: ord("l") for mode in b"1015 1016 2004 47 1047 1049".split()}
_DEC_MODES_RESET |= {mode: ord("l") for mode in b"1 5 6 66 2026".split()}
_DEC_MODES_RESET |= {b"7": ord("h"), b"25": ord("h")}
# Every other DEC mode is dropped (an allowlist: terminals keep adding modes that type into
# the input, such as in-band resize reports 2048, colour-scheme reports 2031 and win32
# input 9001; and VT52 mode 2 or 132 columns 3 change how the rest is read or the window).
# Cursor blinking (12) and saving the cursor (1048) change text only.
_DEC_MODES_ALLOWED = frozenset({*_DEC_MODES_RESET, b"12", b"1048"})
# CSI with intermediates: cursor style (SP q) and soft reset (! p) only.
_CSI_INTERMEDIATE = frozenset({b" q", b"!p"})
_PREFIXES = (b"<", b"=", b">", b"?")  # private parameter prefixes of CSI
_MAX_SEQUENCE = 256  # longer control sequences are dropped whole
_SIZE_CHECK = 0.5  # seconds between looks at the real terminal's size during a run
# A run of text that needs no look: printable ASCII and C0 controls but ENQ and ESC, and
# whole UTF-8 characters but the C1 controls (U+0080..U+009F), in their shortest form only:
# a lenient terminal reads an overlong form (E0 82 9B) as the control it encodes (CSI).
_TEXT = re.compile(
    rb"(?:[\x00-\x04\x06-\x1a\x1c-\x7f]|\xc2[\xa0-\xbf]|[\xc3-\xdf][\x80-\xbf]"
    rb"|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xef][\x80-\xbf]{2}"
    rb"|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})+"
)
# The second byte a UTF-8 lead byte allows when it is not 80..BF: the shortest forms only.
_SECOND_BYTE = {0xE0: (0xA0, 0xBF), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}


class OutputFilter:
    """A byte-stream filter for output bound for a terminal; `feed` it chunks as they
    come (a sequence may be split anywhere), then call `end`."""

    def __init__(self) -> None:
        self._state = "ground"
        self._pending = bytearray()  # the sequence (or UTF-8 character) being read
        self._utf8_left = 0  # continuation bytes still expected
        self._changed: dict[bytes, int] = {}  # DEC mode -> its last final (h or l)

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        i, end = 0, len(data)
        while i < end:
            if self._state == "ground":
                text = _TEXT.match(data, i)
                if text is not None:
                    out += text.group()
                    i = text.end()
                    continue
            self._step(data[i], out)
            i += 1
        return bytes(out)

    def end(self) -> bytes:
        """What to send at the end of the run: modes the command left changed, put back."""
        self._to_ground()
        changed = sorted(
            (mode for mode, final in self._changed.items() if final != _DEC_MODES_RESET[mode]),
            key=int,
        )
        self._changed.clear()
        return b"".join(b"\x1b[?" + mode + bytes([_DEC_MODES_RESET[mode]]) for mode in changed)

    def _step(self, byte: int, out: bytearray) -> None:
        state = self._state
        if state == "ground":
            self._ground(byte, out)
        elif state == "utf8":
            self._utf8(byte, out)
        elif state == "escape":
            self._escape(byte, out)
        elif state == "escape-intermediate":
            self._escape_intermediate(byte, out)
        elif state == "csi":
            self._csi(byte, out)
        elif state == "string":
            self._string(byte)
        elif state == "string-escape":
            self._string_escape(byte, out)

    def _ground(self, byte: int, out: bytearray) -> None:
        if byte == ESC:
            self._start("escape", byte)
        elif byte == _ENQ:
            pass  # the terminal would answer with its answerback message
        elif 0x80 <= byte <= 0x9F:
            self._c1(byte, out)  # an 8-bit control: ESC and byte - 0x40 to a terminal
        elif 0xC2 <= byte <= 0xF4:
            self._start("utf8", byte)
            self._utf8_left = 1 if byte < 0xE0 else 2 if byte < 0xF0 else 3
        else:
            out.append(byte)

    def _utf8(self, byte: int, out: bytearray) -> None:
        low, high = 0x80, 0xBF
        if len(self._pending) == 1:
            low, high = _SECOND_BYTE.get(self._pending[0], (low, high))
        if not low <= byte <= high:  # not a continuation (or an overlong form): cut short
            self._state = "ground"
            self._pending.clear()
            self._ground(byte, out)
            return
        if self._pending == b"\xc2" and byte <= 0x9F:  # U+0080..U+009F: C1 controls
            self._state = "ground"
            self._pending.clear()
            self._c1(byte, out)
            return
        self._pending.append(byte)
        self._utf8_left -= 1
        if not self._utf8_left:
            out += self._pending
            self._pending.clear()
            self._state = "ground"

    def _c1(self, byte: int, out: bytearray) -> None:
        self._start("escape", ESC)
        self._escape(byte - 0x40, out)

    def _escape(self, byte: int, out: bytearray) -> None:
        if byte == ord("["):
            self._pending.append(byte)
            self._state = "csi"
        elif byte in _STRINGS:
            self._state = "string"
        elif 0x20 <= byte <= 0x2F:
            self._pending.append(byte)
            self._state = "escape-intermediate"
        elif byte == ord("Z"):  # DECID: the terminal answers with its identity
            self._to_ground()
        elif 0x30 <= byte <= 0x7E:
            self._pending.append(byte)
            self._emit(out)
        else:
            self._control_inside(byte, out)

    def _escape_intermediate(self, byte: int, out: bytearray) -> None:
        if 0x20 <= byte <= 0x2F and len(self._pending) < _MAX_SEQUENCE:
            self._pending.append(byte)
        elif 0x30 <= byte <= 0x7E:  # character sets, DECALN and the like: text only
            self._pending.append(byte)
            self._emit(out)
        else:
            self._control_inside(byte, out)

    def _csi(self, byte: int, out: bytearray) -> None:
        if 0x40 <= byte <= 0x7E:
            self._pending.append(byte)
            if len(self._pending) <= _MAX_SEQUENCE and self._csi_allowed():
                self._emit(out)
            else:
                self._to_ground()
        elif 0x20 <= byte <= 0x3F:
            self._pending.append(byte)
        else:
            self._control_inside(byte, out)

    def _csi_allowed(self) -> bool:
        body = bytes(self._pending[2:-1])  # after ESC [, before the final byte
        final = self._pending[-1]
        params = body.rstrip(b" !\"#$%&'()*+,-./")
        intermediates = body[len(params) :]
        prefix = params[:1]
        if intermediates:
            return prefix not in _PREFIXES and intermediates + bytes([final]) in _CSI_INTERMEDIATE
        if prefix == b"?":
            return self._dec_mode(params[1:], final)
        if prefix in _PREFIXES:
            return False  # queries and keyboard protocols
        if final in b"hl":
            return all(mode in _ANSI_MODES for mode in params.split(b";"))
        return final in _CSI_PLAIN

    def _dec_mode(self, params: bytes, final: int) -> bool:
        if final in b"JK":  # selective erase
            return True
        if final not in b"hl":
            return False  # queries (DECRQM, XTQMODKEYS, ...) and unknown ones
        modes = params.split(b";")
        if any(mode not in _DEC_MODES_ALLOWED for mode in modes):
            return False
        for mode in modes:
            if mode in _DEC_MODES_RESET:
                self._changed[mode] = final
        return True

    def _string(self, byte: int) -> None:
        if byte == _BEL or byte == 0x9C:  # BEL ends an OSC in xterm; 0x9C is 8-bit ST
            self._to_ground()
        elif byte == ESC:
            self._state = "string-escape"
        elif byte in (_CAN, _SUB):  # cancel the string, as a terminal does
            self._to_ground()

    def _string_escape(self, byte: int, out: bytearray) -> None:
        self._to_ground()
        if byte != ord("\\"):  # not ST: the string ended there, a new sequence starts
            self._start("escape", ESC)
            self._escape(byte, out)

    def _control_inside(self, byte: int, out: bytearray) -> None:
        """A C0 control in the middle of a sequence: a terminal acts on it and goes on
        with the sequence (CAN and SUB cancel it, ESC starts a new one)."""
        if byte == ESC:
            self._to_ground()
            self._start("escape", ESC)
        elif byte in (_CAN, _SUB):
            self._to_ground()
        elif byte < 0x20 and byte != _ENQ:
            out.append(byte)
        elif byte >= 0x80:
            self._to_ground()
            self._ground(byte, out)

    def _start(self, state: str, byte: int) -> None:
        self._state = state
        self._pending[:] = bytes([byte])

    def _emit(self, out: bytearray) -> None:
        out += self._pending
        self._to_ground()

    def _to_ground(self) -> None:
        self._pending.clear()
        self._state = "ground"


class TerminalGuard:
    """Around one run with ``stdio`` (the caller's stdin, stdout, stderr): entering gives
    the three fds for the command; leaving copies out what it wrote, then restores the
    caller's terminals (see the module's doc)."""

    def __init__(self, stdio: Sequence[int], *, filter_output: bool) -> None:
        self.stdio = list(stdio)
        self.filter_output = filter_output
        self._saved: list[tuple[int, list[Any], bytes]] = []  # fd, termios, winsize
        self._ptys: list[tuple[int, threading.Thread]] = []  # slave, copier
        self._reader: int | None = None  # the command's read-only stdin on a terminal

    def __enter__(self) -> list[int]:
        terminals = self._terminals(self.stdio)
        if not terminals:
            return self.stdio
        try:
            return self._guard(terminals)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # This process's ends of the command's terminals: once the command's copies are
        # closed too, each copier reads the end, writes what is left, and stops.
        for slave, _ in self._ptys:
            os.close(slave)
        for _, copier in self._ptys:
            copier.join(5.0)  # a terminal that does not take output (Ctrl-S) holds it
        self._ptys.clear()
        if self._reader is not None:
            os.close(self._reader)
            self._reader = None
        self._restore()

    def _guard(self, terminals: dict[int, int]) -> list[int]:
        import fcntl
        import termios

        for fd in terminals.values():
            self._saved.append(
                (fd, termios.tcgetattr(fd), fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))
            )
        child = list(self.stdio)
        if self.filter_output:
            for rdev, fd in self._terminals(self.stdio[1:]).items():
                slave = self._pty_for(fd)
                for i in (1, 2):
                    if self._rdev(self.stdio[i]) == rdev:
                        child[i] = slave
            if os.isatty(self.stdio[0]):
                child[0] = self._reader = self._read_only(self.stdio[0])
        return child

    @staticmethod
    def _read_only(fd: int) -> int:
        """The terminal on ``fd`` opened anew for reading only: a terminal's stdin is
        usually open for writing too, and what a command wrote to it would reach the
        screen past the filter. (A sandbox running as another uid than the terminal's
        owner cannot open it again for writing either.)"""
        return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)

    def _pty_for(self, real: int) -> int:
        import fcntl
        import termios
        import threading

        master, slave = os.openpty()
        os.set_inheritable(master, False)
        modes = termios.tcgetattr(real)
        modes[1] &= ~termios.OPOST  # output processing is the real terminal's to do
        termios.tcsetattr(slave, termios.TCSANOW, modes)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl.ioctl(real, termios.TIOCGWINSZ, bytes(8)))
        # The copier owns the master and a handle of its own on the terminal: an
        # in-process run puts the pseudo-terminal on this process's fd 1 and 2
        # (`exec.run`), which would loop the output back.
        copier = threading.Thread(
            target=_copy, args=(master, os.dup(real)), daemon=True, name="agentvisor-terminal"
        )
        copier.start()
        self._ptys.append((slave, copier))
        return slave

    def _restore(self) -> None:
        import fcntl
        import signal
        import termios

        # A background `agentvisor exec` may set its terminal's modes without being stopped.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
        try:
            for fd, modes, size in self._saved:
                try:
                    if termios.tcgetattr(fd) != modes:
                        termios.tcsetattr(fd, termios.TCSADRAIN, modes)
                    if fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)) != size:
                        fcntl.ioctl(fd, termios.TIOCSWINSZ, size)
                except (OSError, termios.error):
                    continue  # the terminal went away: nothing to restore
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTTOU})
        self._saved.clear()

    @classmethod
    def _terminals(cls, fds: Sequence[int]) -> dict[int, int]:
        """The terminals among ``fds``: device number -> the first fd open on it."""
        found: dict[int, int] = {}
        for fd in fds:
            if os.isatty(fd):
                found.setdefault(cls._rdev(fd), fd)
        return found

    @staticmethod
    def _rdev(fd: int) -> int:
        try:
            return os.fstat(fd).st_rdev if os.isatty(fd) else -1
        except OSError:
            return -1


def _copy(master: int, real: int) -> None:
    """The command's output to the real terminal, filtered, until every copy of the
    pseudo-terminal's other end is closed (Linux then reads EIO); then closes both fds,
    its own. Meanwhile the real terminal's size follows onto the pseudo-terminal, so a
    command that asks its output for the size after the window was resized gets the new
    one."""
    try:
        _copy_until_closed(master, real)
    finally:
        os.close(master)
        os.close(real)


def _copy_until_closed(master: int, real: int) -> None:
    import select

    output = OutputFilter()
    while True:
        ready, _, _ = select.select([master], [], [], _SIZE_CHECK)
        size = _size(real)
        if size is not None and size != _size(master):
            _set_size(master, size)
        if not ready:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:
            data = b""
        if not data:
            break
        _write_all(real, output.feed(data))
    _write_all(real, output.end())


def _size(fd: int) -> bytes | None:
    import fcntl
    import termios

    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8))
    except OSError:
        return None


def _set_size(fd: int, size: bytes) -> None:
    import fcntl
    import termios

    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, size)


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        return  # the terminal went away; the command's output has nowhere to go
