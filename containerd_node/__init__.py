"""A node's containerd: containerd's own CRI plugin as a second real container runtime beside the Docker shim.

A kubelet given `--container-runtime-endpoint unix://<dir>/containerd.sock` runs its pods on a containerd of the
node's own (as real clusters do since 1.24), with no Docker involved:

- `config` — the per-node layout (root, state, socket, CNI dirs under one labelled directory) and containerd's
  config v2 with the CRI plugin set for this host (after kind's and k3s's containerd templates);
- `launcher` — start it (foreground for hack/supervise.sh, or as a child for tests and benchmarks), wait for
  CRI, and import the project's images from Docker (`docker save | ctr -n k8s.io images import`: no registry);
- `cleanup` — remove everything one node's containerd made on this host, even after a kill -9: its process
  and shims, containers (runc), CNI attachments, network namespaces, mounts, cgroups, bridge and directories.

Components never import this package: tests, benchmarks and hack/ scripts do (`python -m containerd_node`).
It stands on `cni/` (the node network, the host rules) alone.
"""
