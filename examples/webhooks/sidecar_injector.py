"""An admission webhook server: injects a sidecar container into pods with a given label, and
(as a validating webhook) refuses pods with another. HTTPS with a certificate from the cluster CA.

    python -m apiserver.auth.pki serving-cert --dir _output/local-up --name sidecar-injector --san 127.0.0.1
    python examples/webhooks/sidecar_injector.py --port 9443 \\
        --cert _output/local-up/pki/sidecar-injector.crt --key _output/local-up/pki/sidecar-injector.key
    sed "s|CA_BUNDLE|$(base64 -w0 _output/local-up/pki/ca.crt)|" examples/webhooks/sidecar-injector.yaml \\
        | kubectl apply -f -

Endpoints: POST /mutate and POST /validate take an admission.k8s.io/v1 AdmissionReview and
answer one (the mutation as a base64 JSONPatch); GET /healthz. Only the standard library and
aiohttp (already a minik8s dependency).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import shlex
import ssl
from typing import Any

from aiohttp import web

log = logging.getLogger("sidecar-injector")

INJECTED = "sidecar.minik8s.io/injected"


def _label(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key, value


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def sidecar_patch(pod: dict[str, Any], sidecar: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSONPatch that adds the sidecar (and an annotation saying so), or [] when it is there."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if any(c.get("name") == sidecar["name"] for c in containers):
        return []
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/spec/containers/-", "value": sidecar}]
    annotations = (pod.get("metadata") or {}).get("annotations")
    if annotations is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {INJECTED: "true"}})
    else:
        ops.append({"op": "add", "path": f"/metadata/annotations/{_pointer(INJECTED)}", "value": "true"})
    return ops


WARN_LABEL = "sidecar.minik8s.io/warn"


def _answer(review: dict[str, Any], response: dict[str, Any]) -> web.Response:
    request = review.get("request") or {}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request.get("uid", ""), **response}}
    return web.json_response(body)


def make_app(inject: tuple[str, str], deny: tuple[str, str], sidecar: dict[str, Any]) -> web.Application:
    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        req = review.get("request") or {}
        pod = req.get("object") or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if req.get("kind", {}).get("kind") != "Pod" or labels.get(inject[0]) != inject[1]:
            return _answer(review, {"allowed": True})
        ops = sidecar_patch(pod, sidecar)
        if not ops:
            return _answer(review, {"allowed": True})
        log.info("injecting %s into %s/%s", sidecar["name"], req.get("namespace"), req.get("name"))
        return _answer(review, {"allowed": True, "patchType": "JSONPatch",
                                "patch": base64.b64encode(json.dumps(ops).encode()).decode()})

    async def validate(request: web.Request) -> web.Response:
        review = await request.json()
        req = review.get("request") or {}
        labels = ((req.get("object") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(deny[0]) == deny[1]:
            return _answer(review, {"allowed": False, "status": {
                "code": 403, "reason": "Forbidden",
                "message": f"pods labelled {deny[0]}={deny[1]} are not allowed here"}})
        if labels.get(WARN_LABEL) == "true":  # admitted, with a warning the client prints
            return _answer(review, {"allowed": True, "warnings": [f"pods labelled {WARN_LABEL}=true are discouraged"]})
        return _answer(review, {"allowed": True})

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.add_routes([web.post("/mutate", mutate), web.post("/validate", validate), web.get("/healthz", healthz)])
    return app


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="sidecar-injecting admission webhook (HTTPS)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9443)
    p.add_argument("--cert", required=True, help="serving certificate (signed by the cluster CA)")
    p.add_argument("--key", required=True)
    p.add_argument("--label", default="sidecar.minik8s.io/inject=true", help="inject into pods with this label")
    p.add_argument("--deny-label", default="sidecar.minik8s.io/deny=true", help="/validate refuses these pods")
    p.add_argument("--sidecar-name", default="sidecar")
    p.add_argument("--sidecar-image", default="minik8s/busybox:1.35")
    p.add_argument("--sidecar-command", default="sh -c 'while true; do sleep 3600; done'")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    sidecar = {"name": args.sidecar_name, "image": args.sidecar_image, "command": shlex.split(args.sidecar_command),
               "imagePullPolicy": "IfNotPresent"}
    app = make_app(_label(args.label), _label(args.deny_label), sidecar)
    log.info("listening on https://%s:%d", args.host, args.port)
    web.run_app(app, host=args.host, port=args.port, ssl_context=context, print=None)


if __name__ == "__main__":
    main()
