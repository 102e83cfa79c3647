"""CrashLoopBackOff / ImagePullBackOff arithmetic (kubelet.backoff), on a fake clock."""

from __future__ import annotations

import pytest

from kubelet.backoff import Backoff
from kubelet.pod_workers import default_pull_policy, fmt_duration


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_failure_restarts_at_once_then_windows_double_to_the_cap() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    assert not b.in_backoff_since("c", clock.now)  # never failed: restart now
    windows = []
    for _ in range(7):
        windows.append(b.next("c", clock.now))
    assert windows == [10, 20, 40, 80, 160, 300, 300]


def test_in_backoff_since_the_crash() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    b.next("c")  # restarted once: the window is 10 s
    crashed = clock.now
    clock.now += 4
    assert b.in_backoff_since("c", crashed)
    assert b.remaining("c", crashed) == pytest.approx(6)
    clock.now += 6.5
    assert not b.in_backoff_since("c", crashed)
    assert b.remaining("c", crashed) == 0


def test_a_long_healthy_run_resets_the_window() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    for _ in range(5):
        b.next("c")
    assert b.get("c") == 160
    clock.now += 2 * 300 + 1  # ran fine for more than twice the cap
    assert not b.in_backoff_since("c", clock.now)
    assert b.next("c", clock.now) == 10


def test_image_pull_windows_count_from_the_failure() -> None:
    clock = Clock()
    b = Backoff(1, 300, clock)
    assert not b.in_backoff("img")
    b.next("img")
    assert b.in_backoff("img") and b.remaining_since_update("img") == pytest.approx(1)
    clock.now += 1.01
    assert not b.in_backoff("img")
    b.next("img")
    assert b.get("img") == 2 and b.last_update("img") == clock.now
    b.reset("img")
    assert b.get("img") == 0 and not b.in_backoff("img")


def test_keys_are_independent_and_forgotten_by_prefix_and_age() -> None:
    clock = Clock()
    b = Backoff(10, 300, clock)
    b.next("pod1/a")
    b.next("pod1/b")
    b.next("pod2/a")
    b.forget_prefix("pod1/")
    assert b.get("pod1/a") == 0 and b.get("pod2/a") == 10
    clock.now += 601
    b.gc()
    assert b.get("pod2/a") == 0


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Backoff(0, 10)
    with pytest.raises(ValueError):
        Backoff(10, 5)


@pytest.mark.parametrize(("image", "policy"), [
    ("busybox", "Always"), ("busybox:latest", "Always"), ("minik8s/httpd:1", "IfNotPresent"),
    ("registry:5000/app", "Always"), ("registry:5000/app:2", "IfNotPresent"), ("app@sha256:abc", "IfNotPresent"),
])
def test_default_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    assert default_pull_policy(image) == policy


def test_durations_print_as_go_does() -> None:
    assert [fmt_duration(s) for s in (1, 10, 80, 300)] == ["1s", "10s", "1m20s", "5m0s"]
