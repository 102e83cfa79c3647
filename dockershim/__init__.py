"""dockershim: a CRI v1 runtime over Docker, one process per node beside its kubelet (as cri-dockerd)."""
