"""The local-path provisioner, `python -m local_path_provisioner` (rancher/local-path-provisioner,
written in Python on machinery/): dynamic hostPath volumes on the node a claim's pod was scheduled to.

- `provisioner.py`: the controller (informers over claims, volumes, classes, nodes and its helper pods →
  one rate-limited queue; the reconcile of a claim, of a volume, of a left-over helper pod);
- `helper_pod.py`: the helper pod that runs the setup (`mkdir`) or teardown (`rm -rf`) script of the
  `local-path-config` ConfigMap on the chosen node, with the base directory as a hostPath;
- `manifests.py`: rancher's deploy/local-path-storage.yaml minus its Deployment (namespace, service
  account, Role, ClusterRole, bindings, the default StorageClass `local-path`, the ConfigMap),
  applied once by an admin at bring-up: `python -m local_path_provisioner install`.
"""
