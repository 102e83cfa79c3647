"""Storage for the apiserver: etcd access (etcd.py) and the watch cache (cacher.py)."""
