"""What the kubelet knows of containers whatever runs them (upstream pkg/kubelet/container)."""
