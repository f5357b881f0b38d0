"""The `warninglight` command: `warninglight follow DIR` (see warninglight.follow)."""
from __future__ import annotations

import sys

USAGE = """usage: warninglight COMMAND ...

commands:
  follow DIR   send a TensorBoard log directory's scalars to Warning Light, live or (--once) after the fact

`warninglight follow --help` for its options."""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "follow":
        from .follow import main as follow

        return follow(rest)
    print(f"warninglight: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2
