"""hack/cluster-images.sh puts every package of the project into the compose cluster's component image: it copies
only the folders of its PACKAGES before building the wheel, so a package pyproject.toml lists and PACKAGES misses
is absent from the image (the compose cluster's dns, proxy, local-path provisioner and metrics-server containers
restarted forever on `No module named ...`, found by the guestbook on compose, issue 17)."""

from __future__ import annotations

import re
import tomllib

from tests.cluster import REPO


def test_the_component_image_holds_every_package_pyproject_lists() -> None:
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    listed = {pattern.rstrip("*") for pattern in include}
    script = (REPO / "hack" / "cluster-images.sh").read_text()
    match = re.search(r"^PACKAGES=\(([^)]*)\)", script, re.MULTILINE)
    assert match, "PACKAGES=(...) not found in hack/cluster-images.sh"
    assert listed - set(match.group(1).split()) == set()
