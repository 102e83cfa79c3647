"""The HTTP side of the subresources (upstream: k8s.io/apiserver/pkg/endpoints/handlers over each
subresource's REST storage): status (the object's .status alone), finalize, scale (autoscaling/v1
Scale over spec.replicas: registry/scale.py), binding (the scheduler's way to set a pod's node: the
write in the pod's BindingREST, registry/podstorage.py), serviceaccounts/token (registry/token.py),
pods/eviction (the pod's EvictionREST, registry/eviction.py), pods/ephemeralcontainers, log, exec, attach and
portforward (relayed to the kubelet: endpoints/proxy.py, the kubectl port-forward tunnel in endpoints/portforward.py);
and the POST of the virtual access reviews (registry/authorization.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.admission.noderestriction import admit_token_request
from apiserver.endpoints.handlers import ResourceHandlers
from apiserver.endpoints.proxy import attach_endpoints, exec_endpoints, log_endpoints, portforward_endpoints
from apiserver.endpoints.request import check_duplicates, decode_object, read_body, write_options
from apiserver.endpoints.resourceproxy import proxy_endpoints
from apiserver.endpoints.responsewriters import json_response
from apiserver.patch import UnsupportedPatchType, apply_patch
from apiserver.registry.eviction import EvictionREST
from apiserver.registry.generic import loc_to_path
from apiserver.registry.podstorage import BindingREST
from apiserver.registry.scale import scale_of, write_scale
from apiserver.registry.token import TokenIssuer, create_token
from machinery.api.autoscaling_v1 import Scale
from machinery.api.core_v1 import Binding
from machinery.api.policy_v1 import Eviction
from machinery.authn.user import UserInfo
from machinery.patch import PatchError
from machinery.types import Obj

Endpoint = Callable[..., Any]


# -- status ------------------------------------------------------------------------------------

def status_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    async def get(request: Request, name: str, namespace: str | None = None) -> Response:
        return json_response(await h.store.get(namespace, name))

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.update(request, name, namespace, subresource="status")

    async def patch(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.patch(request, name, namespace, subresource="status")

    return {"GET": get, "PUT": put, "PATCH": patch}


def finalize_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """namespaces/{name}/finalize: the namespace controller empties spec.finalizers here."""

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.update(request, name, namespace, subresource="finalize")

    return {"PUT": put}


def ephemeral_containers_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """pods/{name}/ephemeralcontainers (upstream EphemeralContainersREST): the whole Pod is read and
    written; a write changes only spec.ephemeralContainers (PodStrategy.prepare_for_subresource_update)."""

    async def get(request: Request, name: str, namespace: str | None = None) -> Response:
        return json_response(await h.store.get(namespace, name))

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.update(request, name, namespace, subresource="ephemeralcontainers")

    async def patch(request: Request, name: str, namespace: str | None = None) -> Response:
        return await h.patch(request, name, namespace, subresource="ephemeralcontainers")

    return {"GET": get, "PUT": put, "PATCH": patch}


# -- scale -------------------------------------------------------------------------------------

def scale_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    async def get(request: Request, name: str, namespace: str | None = None) -> Response:
        return json_response(scale_of(await h.store.get(namespace, name), h.store.scale_paths))

    async def put(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        body, dups = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        check_duplicates(dups, opts, "Scale")
        return json_response(await write_scale(h.store, namespace, name, opts, lambda old: body))

    async def patch(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        body = await read_body(request)

        def patched(old: Obj) -> Obj:
            try:
                return apply_patch(scale_of(old, h.store.scale_paths), content_type, body, Scale)
            except UnsupportedPatchType as e:
                raise errors.unsupported_media_type(content_type) from e
            except PatchError as e:
                raise errors.bad_request(str(e)) from e

        return json_response(await write_scale(h.store, namespace, name, opts, patched))

    return {"GET": get, "PUT": put, "PATCH": patch}


# -- binding -----------------------------------------------------------------------------------

def binding_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """The HTTP side of pods/binding; the pod's BindingREST (registry/podstorage.py) does the write."""
    binding_rest = BindingREST(h.store)

    async def post(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        body, _ = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        try:
            binding = Binding.from_dict(body)
        except ValidationError as e:
            raise errors.bad_request(f"invalid Binding: {e.errors()[0]['msg']} at "
                                     f"{loc_to_path(e.errors()[0]['loc'])}") from e
        await binding_rest.create(namespace, name, binding, opts)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                             201)

    return {"POST": post}


# -- eviction ----------------------------------------------------------------------------------

def eviction_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """The HTTP side of pods/eviction (policy/v1 Eviction, and v1beta1 for old clients); the pod's
    EvictionREST (registry/eviction.py) checks the budget and deletes."""

    async def post(request: Request, name: str, namespace: str | None = None) -> Response:
        opts = write_options(request)
        body, dups = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        check_duplicates(dups, opts, "Eviction")
        try:
            eviction = Eviction.from_dict(body).to_dict()
        except ValidationError as e:
            raise errors.bad_request(f"invalid Eviction: {e.errors()[0]['msg']} at "
                                     f"{loc_to_path(e.errors()[0]['loc'])}") from e
        assert namespace is not None  # pods are namespaced: the installer refuses the path without one
        rest = EvictionREST(h.store, request.app.state.server.stores[("policy", "poddisruptionbudgets")])
        return json_response(await rest.create(namespace, name, eviction, opts), 201)

    return {"POST": post}


# -- serviceaccounts/token -----------------------------------------------------------------------

def token_endpoints(h: ResourceHandlers) -> dict[str, Endpoint]:
    """The HTTP side of serviceaccounts/token; registry/token.py validates, signs and answers."""

    async def post(request: Request, name: str, namespace: str | None = None) -> Response:
        server = request.app.state.server
        issuer: TokenIssuer | None = server.token_issuer
        if issuer is None:  # no signing key: upstream does not install the subresource
            raise errors.page_not_found()
        opts = write_options(request)
        body, dups = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        check_duplicates(dups, opts, "TokenRequest")
        user = opts.user
        admission = server.admission
        if isinstance(user, UserInfo) and user.node_name is not None and "NodeRestriction" in admission.plugins:
            pods = server.stores[("", "pods")]
            await admit_token_request(h.store.info, name, body, lambda pod: pods.get(namespace, pod), user.node_name)
        answer = await create_token(h.store, server.stores[("", "pods")], issuer, namespace, name, body, opts)
        return json_response(answer, 201, opts.warnings)

    return {"POST": post}


# -- virtual resources ---------------------------------------------------------------------------

def review_endpoint(h: ResourceHandlers) -> Endpoint:
    """POST of a virtual resource (the access reviews, registry/authorization.py): decoded (JSON, YAML
    or protobuf), answered, 201 with the review and its status."""

    async def post(request: Request) -> Response:
        opts = write_options(request)
        body, _ = decode_object(await read_body(request), request.headers.get("content-type", "application/json"))
        return json_response(await h.store.create(None, body, opts), 201)

    return post


SUBRESOURCE_HANDLERS: dict[str, Callable[[ResourceHandlers], dict[str, Endpoint]]] = {
    "status": status_endpoints,
    "finalize": finalize_endpoints,
    "scale": scale_endpoints,
    "binding": binding_endpoints,
    "log": log_endpoints,
    "exec": exec_endpoints,
    "attach": attach_endpoints,
    "portforward": portforward_endpoints,
    "token": token_endpoints,
    "eviction": eviction_endpoints,
    "ephemeralcontainers": ephemeral_containers_endpoints,
    "proxy": proxy_endpoints,
}
