"""The volume controllers (upstream pkg/controller/volume/): the PersistentVolume binder and the
claim and volume protection controllers."""
