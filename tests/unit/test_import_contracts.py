"""The import contracts (.importlinter) and the type checker cover every component in the tree.

`lint-imports` and `mypy` only check the packages they are told about: a new component (proxy/,
dns/, ...) left out of .importlinter would be free to import any other, and left out of
[tool.mypy] files it would not be type-checked. This test reads the configuration and the tree and
names what is missing. The checks themselves run in hack/test.sh (`lint-imports`, `mypy`).
"""

from __future__ import annotations

import configparser
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folders with an __init__.py that are not shipped code: tests and benchmarks may import anything.
NOT_COMPONENTS = {"tests", "bench"}
LIBRARIES = {"machinery", "cni"}  # the layers below the components


def contracts() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config


def listed(value: str) -> set[str]:
    return {line.strip() for line in value.splitlines() if line.strip()}


def packages_in_tree() -> set[str]:
    return {p.parent.name for p in ROOT.glob("*/__init__.py")} - NOT_COMPONENTS


def test_every_package_is_a_root_package() -> None:
    roots = listed(contracts()["importlinter"]["root_packages"])
    assert packages_in_tree() - roots == set(), "add these to root_packages and to the contracts"


def test_every_component_is_in_every_contract() -> None:
    config = contracts()
    components = listed(config["importlinter"]["root_packages"]) - LIBRARIES
    # The layers are listed top first: the first line holds the components.
    first_line = config["importlinter:contract:layers"]["layers"].strip().splitlines()[0]
    top_layer = {name.strip() for name in first_line.split(":")}
    assert top_layer == components
    assert listed(config["importlinter:contract:components"]["modules"]) == components
    runtimes = {"dockershim", "containerd_node"}  # the container runtimes' side: they set up the pod network
    assert listed(config["importlinter:contract:cni"]["source_modules"]) == components - runtimes
    assert listed(config["importlinter:contract:acyclic"]["ancestors"]) == components | LIBRARIES


def test_mypy_checks_every_package() -> None:
    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert packages_in_tree() - set(files) == set(), "add these to [tool.mypy] files in pyproject.toml"
