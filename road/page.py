"""The road as a web page (issue 15): a browser that GETs a Road's own URL (through `kubectl proxy`, so the
apiserver's gate applies) gets `ui/road.html`, which reads the same URL as JSON and its watch and draws the
road live: one swim lane per identity, the watch deliveries as arrows from the write, the nodes with their
pods and IPs, steps marked against upstream's SLOs, and a slider to replay."""

from __future__ import annotations

import functools
from importlib import resources

HTML = "text/html; charset=utf-8"


@functools.cache
def page() -> bytes:
    return resources.files(__package__).joinpath("ui/road.html").read_bytes()


def wants_page(accept: str | None) -> bool:
    """A browser's navigation (Accept lists text/html before any JSON); API clients ask for JSON or anything."""
    if not accept:
        return False
    kinds = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    html = kinds.index("text/html") if "text/html" in kinds else None
    json_at = kinds.index("application/json") if "application/json" in kinds else None
    return html is not None and (json_at is None or html < json_at)
