"""The pod-template-hash: FNV-32a over a canonical serialization, in upstream's safe alphabet."""

from __future__ import annotations

from typing import Any

from controllers.hashing import SAFE_ALPHABET, canonical_json, compute_hash, fnv32a, safe_encode_string
from machinery.api.core_v1 import PodTemplateSpec


def template(image: str = "nginx:1.25", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {"app": "nginx"}},
            "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}],
                     "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"}}


def test_fnv32a_matches_the_published_test_vectors() -> None:
    assert fnv32a(b"") == 0x811C9DC5
    assert fnv32a(b"a") == 0xE40C292C
    assert fnv32a(b"foobar") == 0xBF9CF968


def test_fnv32a_can_continue_a_sum() -> None:
    assert fnv32a(b"bar", fnv32a(b"foo")) == fnv32a(b"foobar")


def test_safe_encode_string_maps_bytes_onto_the_safe_alphabet() -> None:
    # upstream rand.SafeEncodeString: alphanums[b % 27]
    assert safe_encode_string("0123456789") == "456789bcdf"
    assert all(c in SAFE_ALPHABET for c in safe_encode_string("any text at all!"))
    assert not set("aeiou013") & set(SAFE_ALPHABET)


def test_hash_is_stable_and_independent_of_key_order_and_model_vs_dict() -> None:
    t = template()
    reordered = {"spec": dict(reversed(list(t["spec"].items()))), "metadata": t["metadata"]}
    model = PodTemplateSpec.model_validate(t)
    assert compute_hash(t) == compute_hash(reordered) == compute_hash(model)
    assert canonical_json(model) == canonical_json(t)


def test_hash_pinned_value_does_not_drift() -> None:
    """A change of these values renames every Deployment's ReplicaSet (a rollout on upgrade)."""
    assert compute_hash(template()) == "5b98dd59db"
    assert compute_hash(template(), 1) == "594c9f87dc"


def test_hash_changes_with_the_template_and_the_collision_count() -> None:
    base = compute_hash(template())
    assert compute_hash(template(image="nginx:1.26")) != base
    assert compute_hash(template(labels={"app": "other"})) != base
    with_count = {compute_hash(template(), n) for n in range(5)}
    assert len(with_count) == 5 and base not in with_count


def test_collision_count_is_hashed_as_eight_little_endian_bytes() -> None:
    raw = canonical_json(template())
    expected = fnv32a(raw + (7).to_bytes(4, "little") + bytes(4))
    assert compute_hash(template(), 7) == safe_encode_string(str(expected))


def test_hash_looks_like_an_upstream_one() -> None:
    h = compute_hash(template())
    assert 1 <= len(h) <= 10  # the decimal digits of a uint32, each one character
    assert set(h) <= set("456789bcdf")  # digits only ever map onto these ten
