"""Log set-up shared by every component's main, as upstream's k8s.io/component-base/logs.

`-v N` follows klog's verbosity loosely: 0 warnings and errors, 1-3 informational messages, 4 and more debug.
"""

from __future__ import annotations

import argparse
import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_flags(parser: argparse.ArgumentParser, default: int = 1) -> None:
    parser.add_argument("-v", "--v", type=int, default=default, help="log verbosity (0-4)")


def level_for(verbosity: int) -> int:
    return logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 1 else logging.WARNING


def setup(verbosity: int) -> None:
    logging.basicConfig(level=level_for(verbosity), format=FORMAT)
    # httpx logs every request at INFO; a component's requests are its own metrics' business, not its log's
    logging.getLogger("httpx").setLevel(logging.WARNING)
