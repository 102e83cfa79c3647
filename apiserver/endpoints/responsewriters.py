"""Writing an answer (upstream k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go,
WriteObjectNegotiated for JSON): every endpoint, generic or subresource, answers through here, and
warnings recorded for the request leave with it."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from apiserver.warning import add_warning

JSON = "application/json"


def json_response(obj: Any, code: int = 200, warnings: list[str] | None = None) -> Response:
    for warning in warnings or ():
        add_warning(warning)  # one channel for every warning: apiserver.warning writes the headers
    return Response(orjson.dumps(obj), status_code=code, media_type=JSON)
