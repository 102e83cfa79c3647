"""CEL validation rules of a structural schema, `x-kubernetes-validations` (upstream
staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel: compilation.go, validation.go).

On the `common-expression-language` package from PyPI (Python bindings of the Rust `cel` crate, kept
current, CEL's macros, `has()`, string functions): it reads `self` as an ordinary variable (cel-python
0.5 treats it as a reserved word in places), and compiles a rule once into a Program that each
object's check reuses.

Each rule sees `self` (the value at its node) and, for a transition rule, `oldSelf` (the stored
object's value at the same path, so the rule runs only on updates that have one). A failed rule is
`<path>: Invalid value: "<type>": <message>`: its `message`, the string its `messageExpression`
yields, or `failed rule: <rule>`; its `reason` and `fieldPath` change the error's type and path.
"""

from __future__ import annotations

import functools
from typing import Any

from apiserver.validation import FieldError, forbidden, invalid, not_supported, required

_REASONS = {"FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"}


@functools.lru_cache(maxsize=4096)
def _compile(source: str) -> Any:
    # Imported on the first rule, not with the apiserver: the package's __init__ imports its command line
    # (prompt_toolkit, rich, typer, pygments: 255 modules, 12 MB of RSS, ~1 s of start-up) whether or not
    # any CRD has a rule.
    import cel

    return cel.compile(source)


@functools.lru_cache(maxsize=4096)
def _rule(source: str) -> tuple[Any, bool]:
    """The compiled rule, and whether it is a transition rule (it reads oldSelf)."""
    program = _compile(source)
    return program, "oldSelf" in set(program.variables())


def check_rule(rule: Any, path: str) -> list[FieldError]:
    """A rule as the CRD gives it: compiled, with a valid reason and message (upstream validation.go)."""
    if not isinstance(rule, dict):
        return [invalid(path, rule, "must be an object")]
    errs: list[FieldError] = []
    source = rule.get("rule")
    if not isinstance(source, str) or not source.strip():
        errs.append(required(f"{path}.rule"))
    else:
        try:
            _compile(source)
        except (ValueError, RuntimeError) as e:
            errs.append(invalid(f"{path}.rule", source, f"compilation failed: {e}"))
    expr = rule.get("messageExpression")
    if expr is not None:
        if not isinstance(expr, str) or not expr.strip():
            errs.append(required(f"{path}.messageExpression", "must be non-empty if specified"))
        else:
            try:
                _compile(expr)
            except (ValueError, RuntimeError) as e:
                errs.append(invalid(f"{path}.messageExpression", expr, f"messageExpression compilation failed: {e}"))
    message = rule.get("message")
    if message is not None and (not isinstance(message, str) or not message.strip()):
        errs.append(required(f"{path}.message", "message must be non-empty if specified"))
    elif isinstance(message, str) and "\n" in message:
        errs.append(invalid(f"{path}.message", message, "message must not contain line breaks"))
    reason = rule.get("reason")
    if reason is not None and reason not in _REASONS:
        errs.append(not_supported(f"{path}.reason", reason, sorted(_REASONS)))
    return errs


def _type_name(schema: dict[str, Any], value: Any) -> str:
    if schema.get("type"):
        return str(schema["type"])
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "integer"


_ABSENT = object()


def validate(value: Any, old: Any, schema: dict[str, Any], path: str = "") -> list[FieldError]:
    """Every rule of the schema tree on value (old: the stored object, or _ABSENT on create)."""
    errs: list[FieldError] = []
    _walk(value, old, schema, path, errs)
    return errs


def validate_object(obj: dict[str, Any], old: dict[str, Any] | None, schema: dict[str, Any]) -> list[FieldError]:
    return validate(obj, _ABSENT if old is None else old, schema)


def _walk(value: Any, old: Any, s: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    if value is None:
        return
    for rule in s.get("x-kubernetes-validations") or []:
        _run(rule, value, old, s, path, errs)
    if isinstance(value, dict):
        props = s.get("properties") or {}
        extra = s.get("additionalProperties")
        for name, item in value.items():
            sub = props.get(name) if name in props else (extra if isinstance(extra, dict) else None)
            if isinstance(sub, dict):
                old_item: Any = old.get(name, _ABSENT) if isinstance(old, dict) else _ABSENT
                _walk(item, old_item, sub, f"{path}.{name}" if path else name if name in props
                      else f"{path}[{name}]", errs)
    elif isinstance(value, list) and isinstance(s.get("items"), dict):
        items = s["items"]
        keys = s.get("x-kubernetes-list-map-keys") or []
        correlate = s.get("x-kubernetes-list-type") == "map" and isinstance(old, list)
        for i, item in enumerate(value):
            old_item = _ABSENT
            if correlate and isinstance(item, dict):  # only map lists correlate elements (by key), as upstream
                want = {k: item.get(k) for k in keys}
                old_item = next((o for o in old if isinstance(o, dict) and {k: o.get(k) for k in keys} == want),
                                _ABSENT)
            _walk(item, old_item, items, f"{path}[{i}]", errs)


def _run(rule: dict[str, Any], value: Any, old: Any, s: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    source = rule.get("rule") or ""
    program, transition = _rule(source)
    if transition and old is _ABSENT and not rule.get("optionalOldSelf"):
        return  # a transition rule runs only where there is an old value
    context: dict[str, Any] = {"self": value}
    if transition:
        context["oldSelf"] = None if old is _ABSENT else old
    where = path + (rule.get("fieldPath") or "") if path or not rule.get("fieldPath") else \
        (rule.get("fieldPath") or "").lstrip(".")
    type_name = _type_name(s, value)
    try:
        result = program.execute(context)
    except KeyError as e:
        errs.append(invalid(where, type_name, f"no such key: {e.args[0]} evaluating rule: {source}"))
        return
    except (ValueError, RuntimeError, TypeError) as e:
        errs.append(invalid(where, type_name, f"{e} evaluating rule: {source}"))
        return
    if result is True:
        return
    if result is not False:
        errs.append(invalid(where, type_name, f"rule did not evaluate to a boolean: {source}"))
        return
    message = rule.get("message") or f"failed rule: {source.strip()}"
    if rule.get("messageExpression"):
        try:
            made = _compile(rule["messageExpression"]).execute(context)
            if isinstance(made, str) and made.strip() and "\n" not in made:
                message = made
        except (KeyError, ValueError, RuntimeError, TypeError):
            pass
    reason = rule.get("reason") or "FieldValueInvalid"
    if reason == "FieldValueForbidden":
        errs.append(forbidden(where, message))
    elif reason == "FieldValueRequired":
        errs.append(required(where, message))
    elif reason == "FieldValueDuplicate":
        errs.append(FieldError("FieldValueDuplicate", where, message, type_name, True))
    else:
        errs.append(invalid(where, type_name, message))
