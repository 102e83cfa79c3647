"""The kubelet's CRI clients (upstream pkg/kubelet/cri/remote)."""
