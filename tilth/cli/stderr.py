"""`say`: one `tilth: ...` line on stderr, registered secrets redacted."""

from __future__ import annotations

import sys

from tilth.store.redaction import redact_text


def say(line: str) -> None:
    print(f"tilth: {redact_text(line)}", file=sys.stderr, flush=True)
