"""`python -m kubectl` and the `mkubectl` console script."""

from __future__ import annotations

import sys

from kubectl.cli import main as _main


def main() -> None:
    sys.exit(_main())


if __name__ == "__main__":
    main()
