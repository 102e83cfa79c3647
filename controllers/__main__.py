"""`python -m controllers`: the kube-controller-manager of minik8s (see controllers.manager)."""

from __future__ import annotations

import sys

from controllers.manager import main

if __name__ == "__main__":
    sys.exit(main())
