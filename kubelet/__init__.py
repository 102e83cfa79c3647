"""The node agent: registers the Node, runs its pods as Docker containers with CNI networking,
reports their status, and serves their logs and exec (python -m kubelet)."""
