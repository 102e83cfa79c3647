"""machinery/validation.py: apimachinery util/validation's name, label and port checks, messages verbatim
(moved here from the apiserver's tests with the code)."""

from __future__ import annotations

import pytest

from machinery.validation import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_http_header_name,
    is_label_key,
    is_qualified_name,
    is_valid_ip,
    is_valid_label_value,
    is_valid_percent,
    is_valid_port_name,
    is_valid_port_num,
    name_is_dns_label,
    name_is_dns_subdomain,
    regex_error,
)

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                   "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
QNAME_NAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


class TestNames:
    def test_subdomain_message_is_upstreams(self) -> None:
        assert is_dns1123_subdomain("Bad_Name") == [SUBDOMAIN_MSG]

    def test_label_message_keeps_upstreams_double_space(self) -> None:
        assert is_dns1123_label("Bad_Name") == [LABEL_MSG]

    def test_label_with_dots_says_so(self) -> None:
        assert is_dns1123_label("a.b") == ["must not contain dots"]

    @pytest.mark.parametrize("name", ["a", "abc-123", "1abc", "a" * 63])
    def test_valid_labels(self, name: str) -> None:
        assert is_dns1123_label(name) == []

    def test_too_long_label(self) -> None:
        assert is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]

    def test_too_long_subdomain(self) -> None:
        assert is_dns1123_subdomain("a" * 254)[0] == "must be no more than 253 characters"

    @pytest.mark.parametrize("name", ["-a", "a-", "A", "a_b", ""])
    def test_invalid_labels(self, name: str) -> None:
        assert is_dns1123_label(name) == [LABEL_MSG]

    def test_generate_name_prefix_may_end_in_dash(self) -> None:
        assert name_is_dns_subdomain("web-", True) == []
        assert name_is_dns_label("web-", True) == []
        assert name_is_dns_subdomain("web-", False) == [SUBDOMAIN_MSG]


class TestLabelsAndAnnotations:
    def test_qualified_names(self) -> None:
        assert is_qualified_name("app") == []
        assert is_qualified_name("example.com/app") == []
        assert is_qualified_name("app_") == [QNAME_NAME_MSG]
        assert is_qualified_name("/app") == ["prefix part must be non-empty"]
        assert is_qualified_name("example.com/") == ["name part must be non-empty", QNAME_NAME_MSG]
        assert is_qualified_name("a" * 64) == ["name part must be no more than 63 characters"]
        assert is_qualified_name("a/b/c")[0].startswith("a qualified name must consist of alphanumeric")
        assert is_qualified_name("Bad_Prefix/a") == ["prefix part " + SUBDOMAIN_MSG]

    def test_label_values(self) -> None:
        assert is_valid_label_value("") == []
        assert is_valid_label_value("v1.2_x") == []
        assert is_valid_label_value("-x") == [LABEL_VALUE_MSG]
        assert is_valid_label_value("a" * 64) == ["must be no more than 63 characters"]

    def test_label_key_and_qualified_name_differ_only_in_the_too_many_slashes_message(self) -> None:
        for key in ("app", "example.com/app", "app_", "/app", "example.com/", "a" * 64, "Bad_Prefix/a"):
            assert is_label_key(key) == is_qualified_name(key)
        assert is_label_key("a/b/c")[0].startswith("a valid label key must consist of alphanumeric")
        assert is_label_key("a/b/c")[0].endswith(" with an optional DNS subdomain prefix and '/' "
                                                 "(e.g. 'example.com/MyName')")

    def test_bytes_not_code_points(self) -> None:
        """Go's len(): 21 three-byte characters are 63 bytes, 22 are too many."""
        assert "must be no more than 63 characters" in is_valid_label_value("\u20ac" * 22)
        assert "must be no more than 63 characters" not in is_valid_label_value("\u20ac" * 21)

    def test_a_trailing_newline_is_not_a_valid_name(self) -> None:
        """Go's `$` ends the text; Python's would let "web\\n" through."""
        assert is_dns1123_subdomain("web\n") == [SUBDOMAIN_MSG]
        assert is_valid_label_value("web\n") == [LABEL_VALUE_MSG]


class TestPortsPercentsAddresses:
    def test_port_names(self) -> None:
        assert is_valid_port_name("http") == []
        assert is_valid_port_name("8080") == ["must contain at least one letter (a-z)"]
        assert is_valid_port_name("a--b") == ["must contain consecutive hyphens".replace("must", "must not")]
        assert is_valid_port_name("-ab") == ["must not begin or end with a hyphen"]
        assert is_valid_port_name("a" * 16) == ["must be no more than 15 characters"]
        assert is_valid_port_name("HTTP") == ["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                                              "must contain at least one letter (a-z)"]

    def test_port_numbers(self) -> None:
        assert is_valid_port_num(1) == [] and is_valid_port_num(65535) == []
        assert is_valid_port_num(0) == ["must be between 1 and 65535, inclusive"]
        assert is_valid_port_num(65536) == ["must be between 1 and 65535, inclusive"]

    def test_percents_headers_ips(self) -> None:
        assert is_valid_percent("25%") == []
        assert is_valid_percent("25") == ["a valid percent string must be a numeric string followed by an ending "
                                          "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"]
        assert is_http_header_name("X-Header") == []
        assert is_http_header_name("X Header") == [regex_error(
            "a valid HTTP header must consist of alphanumeric characters or '-'", "[-A-Za-z0-9]+", "X-Header-Name")]
        assert is_valid_ip("10.0.0.1") and is_valid_ip("::1")
        assert not is_valid_ip("10.0.0.256")

    def test_regex_error_without_examples(self) -> None:
        assert regex_error("m", "f") == "m (regex used for validation is 'f')"
