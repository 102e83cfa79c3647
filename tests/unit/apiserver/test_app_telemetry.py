"""FastAPI's native OpenTelemetry stays off in the apiserver: it traces through --tracing-config-file and counts
through /metrics, and FastAPI's check for configured global providers cost every request ~3 µs."""

from __future__ import annotations

from apiserver.app import ApiServerConfig, create_app


def test_fastapi_native_telemetry_is_off() -> None:
    app = create_app(ApiServerConfig())
    config = app._telemetry
    assert (config["tracing"], config["metrics"], config["logs"]) == (False, False, False)
    assert app._native_telemetry.enabled() is False
