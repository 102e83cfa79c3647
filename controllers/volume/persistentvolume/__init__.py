"""The PersistentVolume controller (upstream pkg/controller/volume/persistentvolume)."""

from controllers.volume.persistentvolume.pv_controller import PersistentVolumeController

__all__ = ["PersistentVolumeController"]
