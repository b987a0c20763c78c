"""The `fact` console script of the installed package: the same command line as the `fact` program, run by the
C++ core in this process (fact._core.run_cli)."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from fact.api.core import FactError, core

    try:
        return core().run_cli(["fact", *(sys.argv[1:] if argv is None else argv)])
    except FactError as e:
        print(f"fact: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
