"""The node agent: registers the Node, runs its pods on a CRI container runtime (the Docker shim,
containerd), reports their status, and serves their logs and exec (python -m kubelet)."""
