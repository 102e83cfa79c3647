"""The kubelet's container manager (upstream pkg/kubelet/cm): the QoS cgroup hierarchy its pods run in.

With --cgroups-per-qos (the default) the kubelet keeps, under --cgroup-root, upstream's cgroupfs layout:

    <cgroup-root>/kubepods                      cpu.shares from the node's allocatable CPU
    <cgroup-root>/kubepods/pod<UID>             a Guaranteed pod: its requests as shares, its limits as quota
    <cgroup-root>/kubepods/burstable            cpu.shares: the sum of its pods' CPU requests
    <cgroup-root>/kubepods/burstable/pod<UID>
    <cgroup-root>/kubepods/besteffort           cpu.shares 2
    <cgroup-root>/kubepods/besteffort/pod<UID>

A pod's cgroup is made before its sandbox and handed to the runtime as the sandbox's cgroup parent
(LinuxPodSandboxConfig.cgroup_parent); it is removed once the pod's containers are gone.
"""
