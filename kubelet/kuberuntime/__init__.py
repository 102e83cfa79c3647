"""The kubelet's runtime manager over the CRI (upstream pkg/kubelet/kuberuntime)."""
