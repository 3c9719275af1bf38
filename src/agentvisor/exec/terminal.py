"""The caller's terminal around one `agentvisor exec` run.

A sandboxed command writes to the caller's terminal, and a terminal obeys more than text:
it sets its window title (OSC 0/1/2), copies to the clipboard (OSC 52), resizes or moves
its window (CSI t), takes DCS/APC/PM/SOS strings (graphics, tmux passthrough, DECRQSS),
and answers queries (device status, attributes, modes) by typing the answer into the
input of whatever reads next, the caller's shell once the run is over. Its modes (echo,
canonical input), window size and display state (character sets, keypad, scroll region,
cursor style, ...) outlive the command too. And a process that holds a descriptor of the
terminal can do all of that past any filter: reopen it for writing (``/proc/self/fd/0``
for a caller of the same uid), change its modes and size with ioctls (a read-only
descriptor is enough), or type into it (TIOCSTI, where the kernel allows it).

`TerminalGuard` therefore, for one run, never lets the command hold a descriptor of the
caller's terminal:
- it remembers the modes (termios) and window size of every terminal among the caller's
  stdin/stdout/stderr and puts them back afterwards;
- the command gets a fresh pseudo-terminal in place of each of them (so it still sees a
  terminal: colours, widths, full-screen programs, line editing and echo work). This
  process relays: keys from the caller's terminal to the pseudo-terminal (the caller's put
  in a raw-input mode for the run; Ctrl-C, Ctrl-\\ and Ctrl-Z still signal the caller, which
  ends the run), what the command writes back through `OutputFilter` (unless the caller
  asked for raw output), and the window size;
- keys are relayed only while the caller is its terminal's foreground job; a run started
  in the background reads an empty stdin (/dev/null), as it must not take the shell's keys.

`OutputFilter` keeps text, colours (SGR) and cursor and screen control, drops the rest,
and at the end puts back the state the command left changed: modes that make the terminal
type into the input (mouse and focus reports, bracketed paste, keypad and cursor keys,
newline mode), the alternate screen, a hidden cursor, character sets, the scroll region,
the cursor style and colours.

The filter is written here by hand: libraries either strip every escape (colours too) or
emulate a whole screen (pyte); neither passes a byte stream through with a policy.
"""

from __future__ import annotations

import contextlib
import os
import re

TYPE_CHECKING = False  # typing costs milliseconds on every `exec`
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from types import TracebackType
    from typing import Any

ESC = 0x1B
_CAN, _SUB, _ENQ, _BEL, _SO, _SI = 0x18, 0x1A, 0x05, 0x07, 0x0E, 0x0F
# ESC followed by these opens a string (DCS, SOS, OSC, PM, APC, and screen's title ESC k):
# the whole string goes, up to its terminator.
_STRINGS = frozenset(b"PX]^_k")
# ESC followed by one of these (no intermediate) changes text or the cursor only: save and
# restore the cursor (7, 8), index, next line, reverse index, back and forward index; and
# the keypad's application and numeric modes (=, >), put back at the end. Every other one
# is dropped: RIS (c) resets the whole terminal, HTS (H) sets a tab stop for good, locking
# and single shifts (n, o, |, }, ~, N, O) switch character sets, DECID (Z) is answered, the
# HP memory lock (l, m) holds part of the screen.
_ESC_PLAIN = frozenset(b"6789DEM=>")
# ESC with intermediates: the G0 and G1 character sets (ESC ( F, ESC ) F; G0 and the shift
# state are put back at the end, G1 is not: it shows only after SO, programs designate it
# before they use it (terminfo's enacs), and terminals start it differently) and line size
# or the alignment test (ESC # 3..6, 8).
# Dropped: G2/G3 and 96-character sets, ESC % (leaves UTF-8 on some terminals), ESC SP
# (S8C1T makes the terminal type 8-bit controls into the input).
_CHARSETS = frozenset(b"()")
_LINE_ATTRIBUTES = frozenset({b"#3", b"#4", b"#5", b"#6", b"#8"})
# CSI finals without a parameter prefix that only move, erase, scroll or colour text. Not
# g (TBC: clears tab stops for good); b (REP) is checked on its own.
_CSI_PLAIN = frozenset(b"@ABCDEFGHIJKLMPSTXZ`adefmrsu")
# ANSI modes (CSI Pm h/l) that change text or the Return key only: insert (4) and newline
# (20), put back when left on. Not 2 (KAM), which locks the keyboard.
_ANSI_MODES = {b"4": "insert", b"20": "newline"}
_MAX_REPEAT = 65535  # REP counts above a screen's worth only load the terminal
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
# What puts back the other state a command left changed, in the order it is sent after the
# DEC modes (the alternate screen is left first: margins and colours are the main screen's).
_PUT_BACK = {
    "margins": b"\x1b7\x1b[r\x1b8",  # DECSTBM homes the cursor: keep it where it is
    "charset": b"\x1b(B\x0f",  # ASCII in G0, and G0 in use
    "keypad": b"\x1b>",
    "insert": b"\x1b[4l",
    "newline": b"\x1b[20l",
    "cursor-style": b"\x1b[0 q",  # the terminal's configured default
    "colours": b"\x1b[m",
}
_PREFIXES = (b"<", b"=", b">", b"?")  # private parameter prefixes of CSI
_MAX_SEQUENCE = 256  # longer control sequences are dropped whole
_SIZE_CHECK = 0.5  # seconds between looks at the real terminal's size during a run
_DRAIN = 5.0  # seconds the output of a finished run may still take (Ctrl-S holds it)
# A run of text that needs no look: printable ASCII and C0 controls but ENQ, SO, SI and
# ESC, and whole UTF-8 characters but the C1 controls (U+0080..U+009F), in their shortest
# form only: a lenient terminal reads an overlong form (E0 82 9B) as the control it encodes.
_TEXT = re.compile(
    rb"(?:[\x00-\x04\x06-\x0d\x10-\x1a\x1c-\x7f]|\xc2[\xa0-\xbf]|[\xc3-\xdf][\x80-\xbf]"
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
        self._left: set[str] = set()  # keys of _PUT_BACK the command left changed
        self._g0 = ord("B")  # the character set designated to G0
        self._shifted = False  # SO: G1 in use

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
        """What to send at the end of the run: the state the command left changed, put
        back."""
        self._to_ground()
        changed = sorted(
            (mode for mode, final in self._changed.items() if final != _DEC_MODES_RESET[mode]),
            key=int,
        )
        modes = b"".join(b"\x1b[?" + mode + bytes([_DEC_MODES_RESET[mode]]) for mode in changed)
        rest = b"".join(sequence for key, sequence in _PUT_BACK.items() if key in self._left)
        self._changed.clear()
        self._left.clear()
        return modes + rest

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
        elif byte < 0x20:
            self._c0(byte, out)
        elif 0x80 <= byte <= 0x9F:
            self._c1(byte, out)  # an 8-bit control: ESC and byte - 0x40 to a terminal
        elif 0xC2 <= byte <= 0xF4:
            self._start("utf8", byte)
            self._utf8_left = 1 if byte < 0xE0 else 2 if byte < 0xF0 else 3
        else:
            out.append(byte)

    def _c0(self, byte: int, out: bytearray) -> None:
        if byte == _ENQ:
            return  # the terminal would answer with its answerback message
        if byte in (_SO, _SI):
            self._shifted = byte == _SO
            self._charset_changed()
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
        elif byte in _ESC_PLAIN:
            if byte in b"=>":
                self._track("keypad", byte == ord(">"))
            self._pending.append(byte)
            self._emit(out)
        elif 0x30 <= byte <= 0x7E:
            self._to_ground()  # see _ESC_PLAIN: dropped
        else:
            self._control_inside(byte, out)

    def _escape_intermediate(self, byte: int, out: bytearray) -> None:
        if 0x20 <= byte <= 0x2F and len(self._pending) < _MAX_SEQUENCE:
            self._pending.append(byte)
        elif 0x30 <= byte <= 0x7E:
            self._pending.append(byte)
            if self._escape_allowed(bytes(self._pending[1:])):
                self._emit(out)
            else:
                self._to_ground()
        else:
            self._control_inside(byte, out)

    def _escape_allowed(self, body: bytes) -> bool:
        """``body``: an escape sequence with intermediates, after its ESC."""
        if len(body) == 2 and body[0] in _CHARSETS:
            if body[0] == ord("("):
                self._g0 = body[1]
                self._charset_changed()
            return True
        return body in _LINE_ATTRIBUTES

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
        if intermediates:  # only the cursor style (DECSCUSR, CSI Ps SP q)
            if prefix in _PREFIXES or intermediates + bytes([final]) != b" q":
                return False
            self._track("cursor-style", params in (b"", b"0"))
            return True
        if prefix == b"?":
            return self._dec_mode(params[1:], final)
        if prefix in _PREFIXES:
            return False  # queries and keyboard protocols
        if final in b"hl":
            return self._ansi_mode(params, final)
        if final == ord("b"):  # REP: the last character again, Ps times
            return params == b"" or (params.isdigit() and int(params) <= _MAX_REPEAT)
        if final == ord("r"):
            self._track("margins", params == b"")
        elif final == ord("m"):
            self._track("colours", params in (b"", b"0"))
        return final in _CSI_PLAIN

    def _ansi_mode(self, params: bytes, final: int) -> bool:
        modes = params.split(b";")
        if any(mode not in _ANSI_MODES for mode in modes):
            return False
        for mode in modes:
            self._track(_ANSI_MODES[mode], final == ord("l"))
        return True

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

    def _charset_changed(self) -> None:
        self._track("charset", self._g0 == ord("B") and not self._shifted)

    def _track(self, key: str, as_before: bool) -> None:
        """Note whether the state ``key`` of `_PUT_BACK` is as a terminal starts it."""
        if as_before:
            self._left.discard(key)
        else:
            self._left.add(key)

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
        elif byte < 0x20:
            self._c0(byte, out)
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


class _Unfiltered:
    """`OutputFilter`'s interface for ``--raw-output``: every byte as it is."""

    def feed(self, data: bytes) -> bytes:
        return data

    def end(self) -> bytes:
        return b""


class TerminalGuard:
    """Around one run with ``stdio`` (the caller's stdin, stdout, stderr): entering gives
    the three fds for the command; leaving waits for its output to be copied out, then
    restores the caller's terminals (see the module's doc). ``caller`` is the pid of the
    process whose stdio it is (this one, or an exec server's client): keys are relayed
    only while it is its terminal's foreground job."""

    def __init__(self, stdio: Sequence[int], *, filter_output: bool, caller: int) -> None:
        self.stdio = list(stdio)
        self.filter_output = filter_output
        self.caller = caller
        self._saved: list[tuple[int, list[Any], bytes]] = []  # fd, termios, winsize
        self._relays: list[tuple[int, _Relay]] = []  # the command's end, its relay
        self._empty_stdin: int | None = None  # /dev/null, for a run in the background

    def __enter__(self) -> list[int]:
        terminals = _terminals(self.stdio)
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
        # closed too, each relay reads the end, writes what is left, and stops.
        for slave, relay in self._relays:
            os.close(slave)
            relay.finish()
        for _, relay in self._relays:
            relay.join()
        self._relays.clear()
        if self._empty_stdin is not None:
            os.close(self._empty_stdin)
            self._empty_stdin = None
        self._restore()

    def _guard(self, terminals: dict[int, list[int]]) -> list[int]:
        import fcntl
        import termios

        for positions in terminals.values():
            fd = self.stdio[positions[0]]
            self._saved.append(
                (fd, termios.tcgetattr(fd), fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))
            )
        child = list(self.stdio)
        foreground = _in_foreground(self.caller)
        if os.isatty(self.stdio[0]) and not foreground:
            # A job in the background must not take the keys meant for the shell.
            child[0] = self._empty_stdin = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        for positions in terminals.values():
            reads_keys = 0 in positions and foreground
            taken = [i for i in positions if i > 0 or reads_keys]
            if taken:
                slave = self._relay(positions, reads_keys)
                for i in taken:
                    child[i] = slave
        return child

    def _relay(self, positions: list[int], reads_keys: bool) -> int:
        """A fresh pseudo-terminal for the caller's terminal at ``positions`` (of stdio),
        with a thread relaying between the two; the command's end of it."""
        import fcntl
        import termios

        real = self.stdio[positions[0]]
        master, slave = os.openpty()
        modes = termios.tcgetattr(real)
        modes[1] &= ~termios.OPOST  # output processing stays the real terminal's to do
        termios.tcsetattr(slave, termios.TCSANOW, modes)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl.ioctl(real, termios.TIOCGWINSZ, bytes(8)))
        keys = os.dup(self.stdio[0]) if reads_keys else None
        relay = _Relay(
            master,
            keys,
            self._screen(positions),
            OutputFilter() if self.filter_output else _Unfiltered(),
            caller=self.caller,
            device=_inode(slave),
        )
        try:
            relay.start()
        except BaseException:
            os.close(slave)
            raise
        self._relays.append((slave, relay))
        return slave

    def _screen(self, positions: list[int]) -> int | None:
        """A handle for writing to the terminal at ``positions``: from stdout or stderr,
        else from stdin when it is open for writing (the echo of typed keys shows there);
        None when nothing may write to it."""
        import fcntl

        for i in positions:
            fd = self.stdio[i]
            if i > 0 or fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
                return os.dup(fd)
        return None

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


def _terminals(fds: Sequence[int]) -> dict[int, list[int]]:
    """The terminals among ``fds``: device number -> the positions in ``fds`` open on it."""
    found: dict[int, list[int]] = {}
    for i, fd in enumerate(fds):
        if os.isatty(fd):
            with contextlib.suppress(OSError):
                found.setdefault(os.fstat(fd).st_rdev, []).append(i)
    return found


def _in_foreground(pid: int) -> bool:
    """Whether process ``pid`` is in its terminal's foreground process group, or has no
    controlling terminal (then no shell takes turns with it on this one). A long-lived
    server is outside its client's session, where tcgetpgrp() does not answer: the
    kernel's /proc/PID/stat does, for any process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after "pid (command name)"
        pgrp, tpgid = int(fields[2]), int(fields[5])
    except (OSError, ValueError, IndexError):
        return False
    return tpgid in (-1, pgrp)


def _raw_input(modes: list[Any]) -> list[Any]:
    """The caller's terminal ``modes`` for relaying keys: each key as it is typed, no echo
    (the pseudo-terminal edits lines and echoes with the caller's own modes), but Ctrl-C,
    Ctrl-\\ and Ctrl-Z still signal the caller (ISIG), which ends or stops the run."""
    import termios

    iflag, oflag, cflag, lflag, ispeed, ospeed, cc = modes
    iflag &= ~(termios.ICRNL | termios.INLCR | termios.IGNCR | termios.ISTRIP | termios.IXON)
    lflag &= ~(termios.ICANON | termios.ECHO | termios.ECHONL | termios.IEXTEN)
    cc = list(cc)
    cc[termios.VMIN], cc[termios.VTIME] = 1, 0
    return [iflag, oflag, cflag, lflag, ispeed, ospeed, cc]


class _Relay:
    """One pseudo-terminal's relay to the caller's terminal, on a thread of its own: keys
    from ``keys`` to the command (in `_raw_input` mode, while the caller is the foreground
    job), the command's output through ``output`` to ``screen``, and the window size (onto
    ``device``, the pseudo-terminal, whose processes are told). It stops when every copy of
    the pseudo-terminal's other end is closed (Linux then reads EIO), or a while after the
    run ended (`finish`) if something still holds it; then it closes its fds, its own: an
    in-process run has put the pseudo-terminal on this process's fds 0, 1 and 2."""

    def __init__(
        self,
        master: int,
        keys: int | None,
        screen: int | None,
        output: OutputFilter | _Unfiltered,
        *,
        caller: int,
        device: tuple[int, int],
    ) -> None:
        import threading

        self.master, self.keys, self.screen, self.output = master, keys, screen, output
        self.caller, self.device = caller, device
        self.size_of = screen if screen is not None else keys  # the real terminal's size
        self.key_modes: list[Any] | None = None  # the caller's terminal while keys relay
        self._ended_read, self._ended_write = os.pipe()
        self._thread = threading.Thread(target=self._run, daemon=True, name="agentvisor-tty")

    def start(self) -> None:
        import termios

        try:
            if self.keys is not None:
                raw = _raw_input(termios.tcgetattr(self.keys))
                termios.tcsetattr(self.keys, termios.TCSANOW, raw)
                self.key_modes = termios.tcgetattr(self.keys)  # as the kernel keeps them
            os.set_blocking(self.master, False)
        except BaseException:
            self._close()
            os.close(self._ended_write)
            raise
        self._thread.start()

    def finish(self) -> None:
        """The run is over: no more keys; what is left of the output goes out."""
        with contextlib.suppress(OSError):
            os.write(self._ended_write, b"x")

    def join(self) -> None:
        self._thread.join(_DRAIN + 1.0)
        os.close(self._ended_write)

    def _run(self) -> None:
        try:
            self._relay()
            if self.screen is not None:
                _write_all(self.screen, self.output.end())
        finally:
            self._close()

    def _close(self) -> None:
        for fd in (self.master, self.keys, self.screen, self._ended_read):
            if fd is not None:
                os.close(fd)

    def _relay(self) -> None:
        import select
        import time

        typed = b""  # keys the pseudo-terminal has not taken yet (its input queue was full)
        keys = self.keys
        ended: float | None = None  # when the run ended
        while ended is None or time.monotonic() - ended < _DRAIN:
            reading = [self.master]
            if ended is None:
                reading.append(self._ended_read)
                if keys is not None and not typed and self._keys_wanted(keys):
                    reading.append(keys)
            writing = [self.master] if typed else []
            ready, writable, _ = select.select(reading, writing, [], _SIZE_CHECK)
            self._follow_size()
            if self._ended_read in ready:
                ended, typed = time.monotonic(), b""
            if writable:
                typed = typed[_write_some(self.master, typed) :]
            if keys is not None and keys in ready:
                typed = _read(keys) or b""
                keys = keys if typed else None  # end of input: the terminal hung up
            if self.master in ready:
                data = _read(self.master)
                if data == b"":
                    return
                if data and self.screen is not None:
                    _write_all(self.screen, self.output.feed(data))

    def _keys_wanted(self, keys: int) -> bool:
        """Whether to read keys now: while the caller is the foreground job, with its
        terminal in the raw-input mode (put back, after a stop and `fg`, when the shell
        has set its own modes meanwhile)."""
        import termios

        if not _in_foreground(self.caller):
            return False
        with contextlib.suppress(OSError, termios.error):
            if self.key_modes is not None and termios.tcgetattr(keys) != self.key_modes:
                termios.tcsetattr(keys, termios.TCSANOW, self.key_modes)
        return True

    def _follow_size(self) -> None:
        size = None if self.size_of is None else _size(self.size_of)
        if size is not None and size != _size(self.master):
            _set_size(self.master, size)
            _tell_resized(self.device)


def _read(fd: int) -> bytes | None:
    """What ``fd`` has: b"" at its end (EIO: a pseudo-terminal nobody holds), None if
    nothing after all."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _write_some(fd: int, data: bytes) -> int:
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError:
        return len(data)  # the command's terminal is gone: the keys have nowhere to go


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


def _tell_resized(device: tuple[int, int]) -> None:
    """SIGWINCH to the processes with the terminal ``device`` (its `_inode`) as stdin,
    stdout or stderr.

    The kernel signals a resize only to the foreground job of a terminal that is a
    session's controlling one, and the command's pseudo-terminal is not: the sandbox
    starts the command in a new session without one (so that no terminal takes TIOCSTI
    from it). So the processes are looked up by their descriptors (readable for the
    sandbox's processes: they run in a user namespace of the caller's, or as another uid
    under a root caller); a resize is rare, the walk takes milliseconds."""
    import signal

    for pid in filter(str.isdigit, os.listdir("/proc")):
        for fd in (0, 1, 2):
            try:
                if _inode(f"/proc/{pid}/fd/{fd}") == device:
                    os.kill(int(pid), signal.SIGWINCH)
                    break
            except OSError:
                continue


def _inode(file: int | str) -> tuple[int, int]:
    """Which file this is: its filesystem and inode (a device number alone could be
    another devpts instance's terminal of the same number)."""
    info = os.stat(file)
    return info.st_dev, info.st_ino


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        return  # the terminal went away; the command's output has nowhere to go


@contextlib.contextmanager
def as_own_stdio(child: list[int]) -> Iterator[None]:
    """This process's stdin, stdout and stderr are ``child``'s (`TerminalGuard`'s) for the
    time of an in-process run (the sandbox inherits them)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (0, 1, 2) if child[fd] != fd}
    for fd in saved:
        os.dup2(child[fd], fd)
    try:
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
