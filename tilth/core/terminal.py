"""The one sanitizer for what tilth prints: control characters other than newline and tab shown
escaped (`\\x1b`, `\\x07`, `\\u009b`, `\\u202e`), so text from a model, a plan, the broker or a file
can never retitle, clear or reprogram the person's terminal (`ESC ] 0 ; ... BEL`, `ESC [ 2 J`).

`clean` is the function; `guard_std_streams` puts it under every write to `sys.stdout` and
`sys.stderr` of a `tilth` command (`cli/main.main`), so no print path can forget it. The only
writer that may send escape sequences of its own is one that styles text it made itself (rich's
table in `tilth status`): it writes to `unguarded(stream)` and hands every cell through `clean`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # as typing.TYPE_CHECKING: every `tilth` command imports this module, few need typing
if TYPE_CHECKING:
    from typing import Any, TextIO

_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
"""Direction overrides and marks: they reorder what is shown (Trojan Source), so they are shown as escapes too."""
_TABLE = {code: (f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}")
          for code in [*_CONTROLS, *_BIDI] if code not in (0x0A, 0x09)}
"""C0 as `\\x1b`; the rest as `\\u009b`, which is also how JSON writes it, so `--json` output stays JSON
(JSON already escapes C0 itself)."""


def clean(text: str) -> str:
    """`text` with every control character but newline and tab written as its escape."""
    return text.translate(_TABLE)


class Guarded:
    """A text stream whose writes pass through `clean`; everything else is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    @property
    def raw_stream(self) -> TextIO:
        return self._stream

    def write(self, text: str) -> int:
        self._stream.write(clean(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_std_streams() -> None:
    """Every later write to `sys.stdout` / `sys.stderr` is cleaned (idempotent)."""
    import sys

    if not isinstance(sys.stdout, Guarded) and sys.stdout is not None:
        sys.stdout = Guarded(sys.stdout)
    if not isinstance(sys.stderr, Guarded) and sys.stderr is not None:
        sys.stderr = Guarded(sys.stderr)


def unguarded(stream: Any) -> TextIO:
    """The stream under a guard, for a writer whose escapes are its own (its text cleaned cell by cell)."""
    return stream.raw_stream if isinstance(stream, Guarded) else stream
