"""Reading `-f FILE|DIR|-`: multi-document YAML (or JSON), `kind: List` expanded, errors worded as kubectl's.

A syntax error names the file and the line as go-yaml counts it (scanner errors on their own
line, parser errors on the line before, which is where go-yaml's parser marks them), with go-yaml's
wording of the common problems: `error: error parsing FILE: error converting YAML to JSON: yaml:
line 7: mapping values are not allowed in this context`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubectl.errors import CommandError

EXTENSIONS = (".json", ".yaml", ".yml")


class _Loader(yaml.SafeLoader):
    """Timestamps stay strings, as sigs.k8s.io/yaml (YAML → JSON) leaves them."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _unique_keys(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    """A key given twice is an error, as go-yaml has it (the server would only ever see the last one)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, str) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f'mapping key "{key}" already defined at line {seen[key] + 1}', key_node.start_mark)
        if isinstance(key, str):
            seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_keys)

# PyYAML's words for a problem → go-yaml's, for the problems people actually make
_GO_WORDING = (
    ("mapping values are not allowed here", "mapping values are not allowed in this context"),
    ("expected ',' or '}'", "did not find expected ',' or '}'"),
    ("expected ',' or ']'", "did not find expected ',' or ']'"),
    ("that cannot start any token", "found character that cannot start any token"),
    ("expected <block end>, but found '-'", "did not find expected '-' indicator"),
    ("expected <block end>", "did not find expected key"),
    ("could not find expected ':'", "could not find expected ':'"),
    ("found unexpected end of stream", "found unexpected end of stream"),
    ("found undefined alias", "unknown anchor referenced"),
)


@dataclass
class Manifest:
    obj: dict[str, Any]
    source: str  # the file as named on the command line, or STDIN


def yaml_error_message(err: yaml.YAMLError) -> str:
    """`yaml: line N: problem`, numbered and worded as go-yaml does."""
    problem = str(getattr(err, "problem", "") or "") or str(err)
    for ours, theirs in _GO_WORDING:
        if ours in problem:
            problem = theirs
            break
    mark = getattr(err, "problem_mark", None)
    context_mark = getattr(err, "context_mark", None)
    line = 0
    if mark is not None and mark.line:
        line = mark.line + (1 if isinstance(err, yaml.scanner.ScannerError) else 0)
    elif context_mark is not None and context_mark.line:
        line = context_mark.line
    where = f"line {line}: " if line else ""
    return f"yaml: {where}{problem}"


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode()
    return value


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def parse_documents(text: str, source: str) -> list[Manifest]:
    """Every object in a (multi-document) YAML or JSON text; List items expanded."""
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        raise CommandError(f"error parsing {source}: error converting YAML to JSON: {yaml_error_message(e)}") from None
    out: list[Manifest] = []
    for doc in docs:
        if doc is None:
            continue
        doc = _jsonable(doc)
        _check(doc, source)
        if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
            for item in doc.get("items") or []:
                if item is None:
                    continue
                _check(item, source)
                out.append(Manifest(item, source))
        else:
            out.append(Manifest(doc, source))
    return out


def _check(doc: Any, source: str) -> None:
    suffix = "; if you choose to ignore these errors, turn validation off with --validate=false"
    if not isinstance(doc, dict):
        raise CommandError(f'error validating "{source}": error validating data: invalid object to validate{suffix}')
    missing = [f"{key} not set" for key in ("apiVersion", "kind") if not doc.get(key)]
    if missing:
        detail = missing[0] if len(missing) == 1 else "[" + ", ".join(missing) + "]"
        raise CommandError(f'error validating "{source}": error validating data: {detail}{suffix}')


def _files(path: str, recursive: bool) -> list[Path]:
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise CommandError(f'the path "{path}" does not exist')
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        found.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(EXTENSIONS))
        if not recursive:
            break
    return found


def load(paths: list[str], *, recursive: bool = False) -> list[Manifest]:
    """Every object of every `-f` argument, in order."""
    out: list[Manifest] = []
    for path in paths:
        if path == "-":
            out.extend(parse_documents(sys.stdin.read(), "STDIN"))
            continue
        for file in _files(path, recursive):
            try:
                text = file.read_text(encoding="utf-8")
            except OSError as e:
                raise CommandError(f"open {file}: {e.strerror or e}") from None
            except UnicodeDecodeError:
                raise CommandError(f"error parsing {file}: the file is not UTF-8 text") from None
            out.extend(parse_documents(text, str(file)))
    return out
