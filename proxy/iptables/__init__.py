"""The iptables mode of kube-proxy: the proxier (rules) and the runner (the iptables binaries)."""
