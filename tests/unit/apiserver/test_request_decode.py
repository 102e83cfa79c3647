"""decode_object's fast path (orjson, members counted outside strings) answers exactly as the careful
decoder (stdlib json with duplicate detection and the body limits) or hands the body to it."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import errors
from apiserver.endpoints import request

JSON = "application/json"


def careful(body: bytes) -> tuple[str, Any]:
    fast = request._fast_json
    request._fast_json = lambda body: None  # type: ignore[assignment]
    try:
        return outcome(body)
    finally:
        request._fast_json = fast  # type: ignore[assignment]


def outcome(body: bytes) -> tuple[str, Any]:
    try:
        value, dups = request.decode_object(body, JSON)
    except errors.ApiError as e:
        return "error", (e.code, str(e))
    return "ok", (repr(value), dups)


CASES = [
    b'{"a":1,"a":2}',
    b'{"a":{"b":1,"b":2}}',
    b'{"a" : 1 , "a" :2}',  # spaces before the colon
    b'{"a":"x:y","b":"\\":"}',  # colons and an escaped quote inside strings
    b'{"a":"\\u003a","a":1}',  # an escaped colon does not hide a duplicate
    b'{"k:":{"x":"a\\\\"}, "k:":2}',
    b'{"a":[{"b":1},{"b":1,"b":2}]}',
    b'{"a":"x:y","a":"z"}',  # the dropped member's string held a colon
    b'{"a":"\\u003a:","a":"::"}',
    b'{"a":1.5,"b":"x:y","b":"z"}',
    b'{"a":999999999999999999,"b":-999999999999999999}',
    b'{"a":18446744073709551616}',  # orjson would read a float here
    b'{"a":-9223372036854775809}',
    b'{"a":9223372036854775807}',
    b'{"a":1e400}',
    b'{"a":NaN}',
    b'\xef\xbb\xbf{"a":1}',
    b'{"a":"\\ud800"}',
    b"[1]",
    b'"x"',
    b'{"a":1,}',
    b'{"a":' + b"[" * 99 + b"]" * 99 + b"}",
    b'{"a":' + b"[" * 100 + b"]" * 100 + b"}",
    "{\"é:\":1,\"é:\":2}".encode(),
    '{"a":1}'.encode("utf-16"),
    b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"nginx:1.25"}]}}',
]


@pytest.mark.parametrize("body", CASES)
def test_fast_decode_answers_as_the_careful_one(body: bytes) -> None:
    assert outcome(body) == careful(body)


def test_fast_path_takes_a_plain_pod_and_leaves_duplicates() -> None:
    pod = b'{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"image":"a:b"}]}}'
    assert request._fast_json(pod) == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                       "spec": {"containers": [{"image": "a:b"}]}}
    assert request._fast_json(b'{"a" :1,"a":2}') is None
    assert request.decode_object(b'{"m":{"a" :1,"a":2}}', JSON)[1] == ["m.a"]
