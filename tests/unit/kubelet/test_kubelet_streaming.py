"""kubelet/streaming.py's pure parts: which protocols the runtime is offered, when the kubelet translates, and
how a v5 client's frames become v4 frames (upstream's StreamTranslator does the same towards SPDY)."""

from __future__ import annotations

from kubelet.streaming import V4, V5, V5ToV4, runtime_subprotocols, translating


def test_v4_is_offered_after_a_v5_only_offer() -> None:
    assert runtime_subprotocols([V5]) == [V5, V4]  # kubectl ≥ 1.30
    assert runtime_subprotocols([V5, V4, "channel.k8s.io"]) == [V5, V4, "channel.k8s.io"]
    assert runtime_subprotocols([V4, V5]) == [V4, V5]
    assert runtime_subprotocols(["channel.k8s.io"]) == ["channel.k8s.io"]  # no v5: nothing to translate


def test_translates_only_when_the_runtime_took_the_added_v4() -> None:
    assert translating([V5], V4)
    assert not translating([V5], V5)  # the Docker shim speaks v5: verbatim
    assert not translating([V5, V4], V4)  # the client speaks v4 itself: verbatim
    assert not translating([V5], None)


def test_data_resize_and_empty_frames_pass_verbatim() -> None:
    t = V5ToV4(tty=True)
    for frame in (b"\x00hello", b"\x04{\"Width\":80,\"Height\":24}", b"\x00", b""):
        assert t.client_frame(frame) == frame


def test_stdin_close_with_a_tty_is_the_terminal_eof_once() -> None:
    t = V5ToV4(tty=True)
    assert t.client_frame(b"\x00echo hi\r") == b"\x00echo hi\r"
    assert t.client_frame(bytes([255, 0])) == b"\x00\x04"
    assert t.client_frame(bytes([255, 0])) is None  # a repeated CLOSE is not a second ^D


def test_stdin_close_without_a_tty_is_not_sent() -> None:
    assert V5ToV4(tty=False).client_frame(bytes([255, 0])) is None


def test_close_of_another_channel_or_malformed_is_dropped() -> None:
    t = V5ToV4(tty=True)
    assert t.client_frame(bytes([255, 4])) is None  # the resize stream's end
    assert t.client_frame(bytes([255])) is None
    assert t.client_frame(bytes([255, 0, 0])) is None
    assert not t.stdin_closed
