"""Authentication types shared by the apiserver and the kubelet (upstream k8s.io/apiserver/pkg/authentication)."""
