"""The CNI runtime: per-node network configuration, plugin invocation by the CNI spec, and the
host rules that let pods on several node bridges of one host reach each other."""
