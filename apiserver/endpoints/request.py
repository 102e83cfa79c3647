"""Reading a request: body size limit, JSON/YAML decoding with duplicate-field detection, content
negotiation (plain JSON or a meta.k8s.io Table), and the write options in the query string (from the
one parse the gate made: apiserver.requestinfo)."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import yaml
from starlette.requests import Request
from starlette.websockets import WebSocket

from apiserver import errors, protobuf
from apiserver.patch import YamlLoader, yaml_key
from apiserver.registry.generic import DeleteOptions, WriteOptions
from apiserver.requestinfo import Query, of_scope
from apiserver.validation import INT64_MAX, MAX_BODY_DEPTH, MAX_BODY_NODES, check_body_values

MAX_REQUEST_BYTES = 3 * 1024 * 1024  # upstream's limit on a request body


async def read_body(request: Request, limit: int = MAX_REQUEST_BYTES) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise errors.too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise errors.too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class _Dups(dict):  # type: ignore[type-arg]
    """A decoded JSON object that remembers keys it saw twice."""

    dups: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = _Dups()
    dups = []
    for k, v in pairs:
        if k in out:
            dups.append(k)
        out[k] = v
    out.dups = dups
    return out


def _duplicate_paths(value: Any, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        found += [f"{path}.{k}" if path else k for k in getattr(value, "dups", ())]
        for k, v in value.items():
            found += _duplicate_paths(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _duplicate_paths(v, f"{path}[{i}]")
    return found


class _DupYamlLoader(YamlLoader):
    pass


def _yaml_mapping(loader: _DupYamlLoader, node: yaml.MappingNode) -> dict[str, Any]:
    loader.flatten_mapping(node)  # `<<: *defaults` merge keys, as upstream's YAML reader honours them
    pairs = [(yaml_key(loader.construct_object(k, deep=True)), loader.construct_object(v, deep=True))
             for k, v in node.value]
    return _pairs(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DupYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _yaml_mapping)


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SURELY_INT64 = 10**18  # an integer of fewer than 19 digits fits; orjson reads some longer ones as floats


class _Unclear(Exception):
    """The fast decode cannot vouch for this body: the careful one decides (and words any error)."""


def _walk(value: dict[str, Any] | list[Any], depth: int, acc: list[int]) -> None:
    """acc[0] += the object members under value, acc[1] += its nodes, acc[2] += the colons in its strings
    (names and values); _Unclear for a float or a long integer, or near the depth and size limits."""
    if depth >= MAX_BODY_DEPTH - 1 or acc[1] > MAX_BODY_NODES:
        raise _Unclear
    acc[1] += 1 + len(value)
    if type(value) is dict:
        acc[0] += len(value)
        for key in value:
            if ":" in key:
                acc[2] += key.count(":")
        children: Any = value.values()
    else:
        children = value
    for child in children:
        kind = type(child)
        if kind is str:
            if ":" in child:
                acc[2] += child.count(":")
        elif kind is dict or kind is list:
            acc[1] -= 1
            _walk(child, depth + 1, acc)
        elif kind is int:
            if not -_SURELY_INT64 < child < _SURELY_INT64:
                raise _Unclear
        elif kind is float:
            raise _Unclear


def _fast_json(body: bytes) -> dict[str, Any] | None:
    """The common body decoded by orjson, or None when the careful decoder must look: something orjson
    refuses or reads differently (a non-UTF-8 encoding, a BOM, a lone surrogate, NaN, a float or a long
    integer), a body that is not an object, one near the nesting or size limits, or one that gives a
    field twice.

    Duplicates: in valid JSON a colon is either in a string or separates a member's name from its value,
    so colons = members in the text + colons in the text's strings. Without \\u escapes (the only way a
    string holds a colon the text does not show) the decoded value can only have as many of each or fewer
    (a repeated name keeps one member and its strings), so equal counts mean no field was given twice."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict:
        return None
    acc = [0, 0, 0]
    try:
        _walk(value, 0, acc)
    except _Unclear:
        return None
    if acc[1] > MAX_BODY_NODES:
        return None
    colons = body.count(b":")
    if colons == acc[0] + acc[2] and b"\\u" not in body:
        return value
    if colons != acc[0] and _JSON_STRING.sub(b"", body).count(b":") != acc[0]:  # count outside strings
        return None
    return value


def decode_object(body: bytes, content_type: str) -> tuple[dict[str, Any], list[str]]:
    """The request's object and the paths of fields it gave twice."""
    media = content_type.split(";")[0].strip().lower()
    if not body.strip():
        raise errors.bad_request("the body of the request is empty; an object is required")
    if media in ("application/json", "", "*/*") and (fast := _fast_json(body)) is not None:
        return fast, []
    try:
        if media in ("application/yaml", "application/x-yaml", "text/yaml"):
            value = yaml.load(body, Loader=_DupYamlLoader)
        elif media in ("application/json", "", "*/*"):
            value = json.loads(body, object_pairs_hook=_pairs, parse_constant=_no_constant)
        elif media == protobuf.CONTENT_TYPE:  # kubectl 1.32+ typed creates; protobuf has no duplicate keys
            value = protobuf.decode(body)
        else:
            raise errors.unsupported_media_type(content_type)
        check_body_values(value)
    except (ValueError, yaml.YAMLError) as e:
        raise errors.bad_request(f"the body of the request could not be decoded: {e}") from None
    except RecursionError:
        raise errors.bad_request("the body of the request could not be decoded: nesting too deep") from None
    if not isinstance(value, dict):
        raise errors.bad_request("the body of the request must be an object (a JSON or YAML mapping)")
    return value, _duplicate_paths(value)


def query(request: Request | WebSocket) -> Query:
    """The request's query options, as the gate parsed them once (first value of a repeated parameter)."""
    return of_scope(request.scope).query


def write_options(request: Request) -> WriteOptions:
    q = query(request)
    validation = q.get("fieldValidation") or "Warn"
    if validation not in ("Strict", "Warn", "Ignore"):
        raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn" or "Strict", got "{validation}"')
    dry_run = q.getlist("dryRun")
    if any(d != "All" for d in dry_run):
        raise errors.bad_request(f'unsupported dryRun value: {dry_run}; only "All" is supported')
    return WriteOptions(dry_run=bool(dry_run), field_validation=validation, field_manager=q.get("fieldManager"),
                        force=q.flag("force"), user=request.scope.get("user"),
                        user_agent=request.headers.get("user-agent", ""))


def check_path_name(name: str) -> None:
    """A name from the URL must be one path segment (upstream's key functions refuse the rest with
    IsValidPathSegmentName before any storage key is built)."""
    problems = [f"may not be '{name}'"] if name in (".", "..") else []
    problems += [f"may not contain '{c}'" for c in "/%" if c in name]
    if problems:
        raise errors.bad_request(f'Name parameter invalid: "{name}": {"; ".join(problems)}')


def check_duplicates(duplicates: list[str], opts: WriteOptions, kind: str) -> None:
    """Duplicate fields: refused under Strict, a warning under Warn (upstream's strict decoding)."""
    if not duplicates or opts.field_validation == "Ignore":
        return
    messages = [f'duplicate field "{path}"' for path in duplicates]
    if opts.field_validation == "Strict":
        causes = [{"reason": "FieldValueDuplicate", "message": m, "field": p} for m, p in zip(messages, duplicates,
                                                                                               strict=True)]
        raise errors.ApiError(422, "Invalid", f"{kind} in version cannot be handled: strict decoding error: "
                              + ", ".join(messages), {"kind": kind, "causes": causes})
    opts.warnings.extend(messages)


def delete_options(request: Request, body: bytes) -> DeleteOptions:
    q = query(request)
    data: dict[str, Any] = {}
    if body.strip():
        data, _ = decode_object(body, request.headers.get("content-type", "application/json"))
    opts = DeleteOptions(user=request.scope.get("user"))
    grace = q.get("gracePeriodSeconds", data.get("gracePeriodSeconds"))
    if grace is not None:
        opts.grace_period_seconds = max(_int64(grace, "gracePeriodSeconds"), 0)
    policy = q.get("propagationPolicy", data.get("propagationPolicy"))
    if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
        raise errors.bad_request(f'propagationPolicy must be one of "Orphan", "Background" or "Foreground", '
                                 f'got "{policy}"')
    opts.propagation_policy = policy
    if "orphanDependents" in q:
        opts.orphan_dependents = q.flag("orphanDependents")
    elif data.get("orphanDependents") is not None:
        opts.orphan_dependents = data["orphanDependents"] is True
    pre = data.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise errors.bad_request("preconditions must be an object")
    opts.precondition_uid = pre.get("uid")
    opts.precondition_rv = pre.get("resourceVersion")
    dry_run = q.getlist("dryRun") or data.get("dryRun") or []
    if not isinstance(dry_run, list) or any(d != "All" for d in dry_run):
        raise errors.bad_request(f'unsupported dryRun value: {dry_run}; only "All" is supported')
    opts.dry_run = bool(dry_run)
    return opts


def _int64(value: Any, name: str) -> int:
    """An integer option from the query (a string) or a body (a JSON number), as Go's int64."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise errors.bad_request(f'{name} must be an integer, got "{value}"')
    try:
        number = int(value)
    except ValueError:
        raise errors.bad_request(f'{name} must be an integer, got "{value}"') from None
    if abs(number) > INT64_MAX:
        raise errors.bad_request(f'{name} must be an integer, got "{value}": value out of range')
    return number


def wants_table(request: Request) -> bool:
    """kubectl get asks for `application/json;as=Table;v=v1;g=meta.k8s.io` first."""
    for media_range in request.headers.get("accept", "").split(","):
        params = {p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
                  for p in media_range.split(";")[1:] if "=" in p}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
    return False


def int_param(request: Request, name: str, default: int = 0) -> int:
    raw = query(request).get(name)
    if raw in (None, ""):
        return default
    value = _int64(raw, name)
    if value < 0:
        raise errors.bad_request(f"{name} must not be negative")
    return value
