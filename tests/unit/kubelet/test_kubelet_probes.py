"""Probe verdicts from single results and thresholds (kubelet.probes.ProbeState), port resolution."""

from __future__ import annotations

import pytest

from kubelet.probes import LIVENESS, READINESS, STARTUP, ProbeState, resolve_port
from machinery.api.core_v1 import Container


def test_initial_verdicts() -> None:
    assert ProbeState(READINESS).result is False  # not ready until proven
    assert ProbeState(LIVENESS).result is True  # alive until proven otherwise
    assert ProbeState(STARTUP).result is False


def test_readiness_needs_success_threshold_in_a_row() -> None:
    p = ProbeState(READINESS, success_threshold=2, failure_threshold=3)
    assert not p.observe(True) and p.result is False
    assert p.observe(True) and p.result is True
    assert not p.observe(False) and not p.observe(False) and p.result is True
    assert p.observe(False) and p.result is False
    assert not p.observe(True)  # one success is not enough to come back
    assert p.observe(True) and p.result is True


def test_liveness_fails_after_failure_threshold_and_a_success_resets_the_count() -> None:
    p = ProbeState(LIVENESS, failure_threshold=3)
    p.observe(False)
    p.observe(False)
    p.observe(True)
    p.observe(False)
    assert p.result is True and p.failures == 1
    p.observe(False)
    assert p.observe(False) and p.result is False


def test_liveness_and_startup_succeed_on_one_success() -> None:
    p = ProbeState(STARTUP, success_threshold=5)
    assert p.observe(True) and p.result is True


def test_reset_for_a_new_container() -> None:
    p = ProbeState(READINESS)
    p.observe(True)
    p.reset()
    assert p.result is False and p.successes == 0 and p.failures == 0


def test_ports_by_number_or_name() -> None:
    c = Container.model_validate({"name": "c", "ports": [{"name": "http", "containerPort": 8080}]})
    assert resolve_port(80, c) == 80
    assert resolve_port("8081", c) == 8081
    assert resolve_port("http", c) == 8080
    with pytest.raises(ValueError):
        resolve_port("grpc", c)
