"""machinery.logs: the one log set-up of every component's main."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator

import pytest

from machinery import logs


@pytest.fixture
def clean_root() -> Iterator[None]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level, logging.getLogger("httpx").level
    try:
        yield
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        logging.getLogger("httpx").setLevel(saved[2])


@pytest.mark.parametrize(("verbosity", "level"), [(0, logging.WARNING), (1, logging.INFO), (3, logging.INFO),
                                                  (4, logging.DEBUG), (9, logging.DEBUG)])
def test_verbosity_maps_to_a_level(verbosity: int, level: int) -> None:
    assert logs.level_for(verbosity) == level


def test_flags_take_klog_short_and_long_forms_with_a_default() -> None:
    parser = argparse.ArgumentParser()
    logs.add_flags(parser)
    assert parser.parse_args([]).v == 1
    assert parser.parse_args(["-v", "4"]).v == 4
    assert parser.parse_args(["--v", "0"]).v == 0
    quiet = argparse.ArgumentParser()
    logs.add_flags(quiet, default=0)
    assert quiet.parse_args([]).v == 0


@pytest.mark.usefixtures("clean_root")
def test_setup_sets_the_root_level_and_quiets_per_request_logs() -> None:
    logging.getLogger().handlers.clear()  # pytest's capture handlers would make basicConfig a no-op
    logs.setup(4)
    assert logging.getLogger().level == logging.DEBUG
    assert logging.getLogger("httpx").level == logging.WARNING
    [handler] = logging.getLogger().handlers
    assert handler.formatter is not None and handler.formatter._fmt == logs.FORMAT
