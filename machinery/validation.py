"""Name, label and port checks of k8s.io/apimachinery/pkg/util/validation (validation.go) and the
name validators of apimachinery/pkg/api/validation (NameIsDNSSubdomain, NameIsDNSLabel), with
upstream's messages verbatim. Each check returns the list of what is wrong (empty: valid), as
upstream's `[]string`; the apiserver turns them into field errors, label selectors into their
own errors, the printers into a yes/no."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "NameValidator",
    "byte_len",
    "inclusive_range_error",
    "is_config_map_key",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_http_header_name",
    "is_label_key",
    "is_qualified_name",
    "is_valid_ip",
    "is_valid_label_value",
    "is_valid_percent",
    "is_valid_port_name",
    "is_valid_port_num",
    "max_len_error",
    "name_is_dns1035_label",
    "name_is_dns_label",
    "name_is_dns_subdomain",
    "regex_error",
]

NameValidator = Callable[[str, bool], list[str]]

DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253
LABEL_VALUE_MAX_LENGTH: Final = 63
QUALIFIED_NAME_MAX_LENGTH: Final = 63

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_ERR: Final = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                             "or '-', and must start and end with an alphanumeric character")
_DNS1035_LABEL_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_ERR: Final = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
                             "with an alphabetic character, and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_FMT: Final = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_ERR: Final = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                 "characters, '-' or '.', and must start and end with an alphanumeric character")
_QNAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_ERR: Final = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                     "alphanumeric character")
_LABEL_VALUE_FMT: Final = "(" + _QNAME_FMT + ")?"
_LABEL_VALUE_ERR: Final = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                           "'_' or '.', and must start and end with an alphanumeric character")
_PERCENT_FMT: Final = "[0-9]+%"
_PERCENT_ERR: Final = "a valid percent string must be a numeric string followed by an ending '%'"
_HTTP_HEADER_NAME_FMT: Final = "[-A-Za-z0-9]+"
_HTTP_HEADER_NAME_ERR: Final = "a valid HTTP header must consist of alphanumeric characters or '-'"

_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE: Final = re.compile(_DNS1035_LABEL_FMT)
_QNAME_RE: Final = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)
_PERCENT_RE: Final = re.compile(_PERCENT_FMT)
_HTTP_HEADER_NAME_RE: Final = re.compile(_HTTP_HEADER_NAME_FMT)
_PORT_NAME_CHARSET_RE: Final = re.compile("[-a-z0-9]+")
_PORT_NAME_ONE_LETTER_RE: Final = re.compile("[a-z]")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError, including Go's double space before `or`."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


def byte_len(s: str) -> int:
    """Go's len(): bytes, not code points."""
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def is_dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: a namespace's name, a port name's shape, one DNS label."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if _DNS1123_LABEL_RE.fullmatch(value) is None:
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is not None:
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_ERR, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """IsDNS1035Label: a Service's name (it becomes a DNS label that must not start with a digit)."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if _DNS1035_LABEL_RE.fullmatch(value) is None:
        errs.append(regex_error(_DNS1035_LABEL_ERR, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: most objects' names, label key prefixes."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


_CONFIG_MAP_KEY_FMT: Final = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_ERR: Final = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
_CONFIG_MAP_KEY_RE: Final = re.compile(_CONFIG_MAP_KEY_FMT)


def is_config_map_key(value: str) -> list[str]:
    """IsConfigMapKey: keys of ConfigMap and Secret data (they become file names in volumes)."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if _CONFIG_MAP_KEY_RE.fullmatch(value) is None:
        errs.append(regex_error(_CONFIG_MAP_KEY_ERR, _CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    # hasChDirPrefix: a key is a file name in the volume, never a way out of it
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


@functools.lru_cache(maxsize=1024)
def _prefixed_name_errors(value: str, what: str) -> tuple[str, ...]:
    """[DNS-1123 subdomain '/'] name (≤63, alphanumeric ends); `what` names the whole in the one
    message that speaks of it. Cached: selectors and labels repeat the same few keys."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return (f"{what} " + regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",)
    if not name:
        errs.append("name part must be non-empty")
    elif byte_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if _QNAME_RE.fullmatch(name) is None:
        errs.append("name part " + regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return tuple(errs)


def is_qualified_name(value: str) -> list[str]:
    """IsQualifiedName as label selectors check their keys ("a qualified name ..." for too many '/')."""
    return list(_prefixed_name_errors(value, "a qualified name"))


def is_label_key(value: str) -> list[str]:
    """IsLabelKey (what newer upstream calls IsQualifiedName): the same rules, and the message the
    apiserver gives for a label or annotation key with too many '/' ("a valid label key ...")."""
    return list(_prefixed_name_errors(value, "a valid label key"))


@functools.lru_cache(maxsize=1024)
def _label_value_errors(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if byte_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        errs.append(regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return tuple(errs)


def is_valid_label_value(value: str) -> list[str]:
    """IsValidLabelValue: empty, or ≤63 of [-A-Za-z0-9_.] with alphanumeric ends."""
    return list(_label_value_errors(value))


def is_http_header_name(value: str) -> list[str]:
    if _HTTP_HEADER_NAME_RE.fullmatch(value) is None:
        return [regex_error(_HTTP_HEADER_NAME_ERR, _HTTP_HEADER_NAME_FMT, "X-Header-Name")]
    return []


def _mask_trailing_dash(name: str) -> str:
    """A generateName prefix may end in '-': the random suffix follows it."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-1] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """apimachinery NameIsDNSSubdomain: most kinds (pods, nodes, deployments, ...)."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    """apimachinery NameIsDNSLabel: namespaces (their names end up in DNS as one label)."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    """apimachinery NameIsDNS1035Label: services (a Service's name is a DNS label of its own)."""
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """An IANA_SVC_NAME: at most 15 of [-a-z0-9], at least one letter, no '--', no edge '-'."""
    errs: list[str] = []
    if byte_len(port) > 15:
        errs.append(max_len_error(15))
    if _PORT_NAME_CHARSET_RE.fullmatch(port) is None:
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if _PORT_NAME_ONE_LETTER_RE.search(port) is None:
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_valid_percent(value: str) -> list[str]:
    if _PERCENT_RE.fullmatch(value) is None:
        return [regex_error(_PERCENT_ERR, _PERCENT_FMT, "1%", "93%")]
    return []


def is_valid_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


_WILDCARD_DNS1123_SUBDOMAIN_FMT: Final = "\\*\\." + _DNS1123_SUBDOMAIN_FMT
_WILDCARD_DNS1123_SUBDOMAIN_ERR: Final = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid "
                                          "DNS subdomain, which must consist of lower case alphanumeric characters, "
                                          "'-' or '.' and end with an alphanumeric character")
_WILDCARD_DNS1123_SUBDOMAIN_RE: Final = re.compile(_WILDCARD_DNS1123_SUBDOMAIN_FMT)
HTTP_PATH_FMT: Final = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH_RE: Final = re.compile(HTTP_PATH_FMT)


def is_wildcard_dns1123_subdomain(value: str) -> list[str]:
    """IsWildcardDNS1123Subdomain: an Ingress host such as `*.example.com`."""
    errs: list[str] = []
    if byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if _WILDCARD_DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        errs.append(regex_error(_WILDCARD_DNS1123_SUBDOMAIN_ERR, _WILDCARD_DNS1123_SUBDOMAIN_FMT, "*.example.com"))
    return errs


def is_http_path(value: str) -> bool:
    """The path part of IsDomainPrefixedPath (httpPathFmt)."""
    return _HTTP_PATH_RE.fullmatch(value) is not None


def is_valid_path_segment_name(value: str) -> list[str]:
    """apimachinery/pkg/api/validation/path IsValidPathSegmentName."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]
