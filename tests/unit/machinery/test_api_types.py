"""The API types read and write real upstream manifests unchanged, and refuse what upstream refuses."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from machinery.api import apps_v1, autoscaling_v1, coordination_v1, core_v1

# The nginx Deployment from https://kubernetes.io/docs/concepts/workloads/controllers/deployment/
NGINX_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "nginx-deployment", "labels": {"app": "nginx"}},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2",
                                     "ports": [{"containerPort": 80}]}]},
        },
    },
}

# The same Deployment as the apiserver returns it: defaulted, with metadata and status.
NGINX_DEPLOYMENT_STORED: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "annotations": {"deployment.kubernetes.io/revision": "1"},
        "creationTimestamp": "2026-11-21T23:47:31Z",
        "generation": 1,
        "labels": {"app": "nginx"},
        "managedFields": [{
            "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}}, "manager": "kubectl-client-side-apply",
            "operation": "Update", "time": "2026-11-21T23:47:31Z",
        }],
        "name": "nginx-deployment",
        "namespace": "default",
        "resourceVersion": "1042",
        "uid": "1b0c6b0e-6f3c-4c0e-9a55-2f3a1c7d8e90",
    },
    "spec": {
        "progressDeadlineSeconds": 600,
        "replicas": 3,
        "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "nginx"}},
        "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {
                "containers": [{
                    "image": "nginx:1.14.2", "imagePullPolicy": "IfNotPresent", "name": "nginx",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                "securityContext": {}, "terminationGracePeriodSeconds": 30,
            },
        },
    },
    "status": {
        "availableReplicas": 3,
        "conditions": [
            {"lastTransitionTime": "2026-11-21T23:47:35Z", "lastUpdateTime": "2026-11-21T23:47:35Z",
             "message": "Deployment has minimum availability.", "reason": "MinimumReplicasAvailable",
             "status": "True", "type": "Available"},
            {"lastTransitionTime": "2026-11-21T23:47:31Z", "lastUpdateTime": "2026-11-21T23:47:35Z",
             "message": 'ReplicaSet "nginx-deployment-86dcfdf4c6" has successfully progressed.',
             "reason": "NewReplicaSetAvailable", "status": "True", "type": "Progressing"},
        ],
        "observedGeneration": 1,
        "readyReplicas": 3,
        "replicas": 3,
        "updatedReplicas": 3,
    },
}

REPLICASET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "ReplicaSet",
    "metadata": {
        "name": "nginx-deployment-86dcfdf4c6", "namespace": "default",
        "labels": {"app": "nginx", "pod-template-hash": "86dcfdf4c6"},
        "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": True, "controller": True,
                             "kind": "Deployment", "name": "nginx-deployment",
                             "uid": "1b0c6b0e-6f3c-4c0e-9a55-2f3a1c7d8e90"}],
    },
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx", "pod-template-hash": "86dcfdf4c6"}},
        "template": {
            "metadata": {"labels": {"app": "nginx", "pod-template-hash": "86dcfdf4c6"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.14.2"}]},
        },
    },
    "status": {"availableReplicas": 3, "fullyLabeledReplicas": 3, "observedGeneration": 1,
               "readyReplicas": 3, "replicas": 3},
}

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
    "spec": {
        "initContainers": [
            {"name": "init-db", "image": "busybox:1.36",
             "command": ["sh", "-c", "until nslookup db; do sleep 2; done"]},
            {"name": "log-shipper", "image": "fluent/fluent-bit:3.0", "restartPolicy": "Always",
             "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app", "readOnly": True}]},
        ],
        "containers": [{
            "name": "web",
            "image": "nginx:1.27",
            "imagePullPolicy": "IfNotPresent",
            "args": ["-g", "daemon off;"],
            "workingDir": "/usr/share/nginx",
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"},
                      {"containerPort": 8443, "hostPort": 8443, "hostIP": "0.0.0.0"}],
            "env": [
                {"name": "MODE", "value": "production"},
                {"name": "POD_NAME",
                 "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "MEM_LIMIT", "valueFrom": {"resourceFieldRef": {"containerName": "web",
                                                                         "resource": "limits.memory",
                                                                         "divisor": "1Mi"}}},
                {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "web-config", "key": "color"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "web-secret", "key": "token",
                                                                 "optional": True}}},
            ],
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "web-config"}}],
            "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                          "limits": {"cpu": 1, "memory": "128Mi", "ephemeral-storage": 0.5}},
            "volumeMounts": [{"name": "html", "mountPath": "/usr/share/nginx/html"},
                             {"name": "logs", "mountPath": "/var/log/nginx", "subPath": "nginx",
                              "mountPropagation": "None"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80, "scheme": "HTTP",
                                          "httpHeaders": [{"name": "X-Probe", "value": "liveness"}]},
                              "initialDelaySeconds": 3, "periodSeconds": 10, "timeoutSeconds": 1,
                              "successThreshold": 1, "failureThreshold": 3},
            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
            "startupProbe": {"exec": {"command": ["cat", "/tmp/started"]}, "failureThreshold": 30,
                             "terminationGracePeriodSeconds": 10},
            "lifecycle": {"preStop": {"exec": {"command": ["nginx", "-s", "quit"]}},
                          "postStart": {"httpGet": {"path": "/warm", "port": 80}}},
            "securityContext": {"runAsUser": 101, "runAsGroup": 101, "runAsNonRoot": True,
                                "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": False,
                                "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "FallbackToLogsOnError",
        }, {
            "name": "grpc-sidecar", "image": "example/grpc:1",
            "livenessProbe": {"grpc": {"port": 9090, "service": "health"}},
            "stdin": True, "stdinOnce": True, "tty": True,
        }],
        "volumes": [
            {"name": "html", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
            {"name": "logs", "hostPath": {"path": "/var/log/pods-extra", "type": "DirectoryOrCreate"}},
            {"name": "cfg", "configMap": {"name": "web-config", "items": [{"key": "nginx.conf",
                                                                          "path": "nginx.conf"}]}},
            {"name": "tls", "secret": {"secretName": "web-tls", "defaultMode": 256}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
            {"name": "podinfo", "downwardAPI": {"items": [{"path": "labels",
                                                           "fieldRef": {"fieldPath": "metadata.labels"}}]}},
            {"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}},
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "activeDeadlineSeconds": 3600,
        "dnsPolicy": "ClusterFirst",
        "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["svc.local"],
                      "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "serviceAccountName": "web",
        "serviceAccount": "web",
        "automountServiceAccountToken": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "shareProcessNamespace": True,
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000,
                            "supplementalGroups": [4000], "runAsNonRoot": True,
                            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}],
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "imagePullSecrets": [{"name": "regcred"}],
        "hostname": "web-0",
        "subdomain": "web",
        "setHostnameAsFQDN": False,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                    "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                          "values": ["antarctica-east1", "antarctica-west1"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-9"]}],
                }]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 1,
                    "preference": {"matchExpressions": [{"key": "disktype", "operator": "In",
                                                         "values": ["ssd"]}]},
                }],
            },
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchExpressions": [{"key": "security", "operator": "In",
                                                        "values": ["S1"]}]},
                "topologyKey": "topology.kubernetes.io/zone",
            }]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100,
                "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                    "namespaces": ["default"], "topologyKey": "kubernetes.io/hostname",
                                    "matchLabelKeys": ["pod-template-hash"]},
            }]},
        },
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
        ],
        "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["foo.local", "bar.local"]}],
        "priorityClassName": "high",
        "priority": 1000,
        "readinessGates": [{"conditionType": "www.example.com/feature-1"}],
        "runtimeClassName": "runc",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "overhead": {"cpu": "10m"},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                       "whenUnsatisfiable": "ScheduleAnyway",
                                       "labelSelector": {"matchLabels": {"app": "web"}}}],
        "os": {"name": "linux"},
        "nodeName": "node-1",
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastProbeTime": None,
             "lastTransitionTime": "2026-11-21T23:47:33Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-21T23:47:33Z",
             "reason": "ContainersNotReady", "message": "containers with unready status: [web]"},
        ],
        "hostIP": "172.18.0.2",
        "hostIPs": [{"ip": "172.18.0.2"}],
        "podIP": "10.244.1.5",
        "podIPs": [{"ip": "10.244.1.5"}],
        "startTime": "2026-11-21T23:47:31Z",
        "qosClass": "Burstable",
        "initContainerStatuses": [{
            "name": "init-db", "image": "docker.io/library/busybox:1.36",
            "imageID": "docker.io/library/busybox@sha256:abc",
            "containerID": "docker://1111", "ready": False, "restartCount": 0, "started": False,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                     "startedAt": "2026-11-21T23:47:32Z",
                                     "finishedAt": "2026-11-21T23:47:33Z", "containerID": "docker://1111"}},
        }],
        "containerStatuses": [{
            "name": "web", "image": "docker.io/library/nginx:1.27", "imageID": "", "ready": False,
            "restartCount": 2, "started": True,
            "state": {"running": {"startedAt": "2026-11-21T23:48:01Z"}},
            "lastState": {"terminated": {"exitCode": 137, "signal": 9, "reason": "Error",
                                         "message": "OOMKilled", "startedAt": "2026-11-21T23:47:34Z",
                                         "finishedAt": "2026-11-21T23:48:00Z"}},
            "containerID": "docker://2222",
        }, {
            "name": "grpc-sidecar", "image": "example/grpc:1", "imageID": "", "ready": False,
            "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff",
                                                     "message": "Back-off pulling image"}},
        }],
    },
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1",
                 "labels": {"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux"},
                 "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
    "spec": {
        "podCIDR": "10.244.1.0/24",
        "podCIDRs": ["10.244.1.0/24"],
        "providerID": "docker://node-1",
        "unschedulable": True,
        "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                    "timeAdded": "2026-11-21T23:50:00Z"},
                   {"key": "dedicated", "value": "web", "effect": "NoExecute"}],
    },
    "status": {
        "capacity": {"cpu": "8", "ephemeral-storage": "61202244Ki", "hugepages-2Mi": "0",
                     "memory": "16333852Ki", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "16231452Ki", "pods": "110"},
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-11-21T23:47:31Z",
             "lastTransitionTime": "2026-11-21T23:40:00Z", "reason": "KubeletHasSufficientMemory",
             "message": "kubelet has sufficient memory available"},
            {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-21T23:47:31Z",
             "lastTransitionTime": "2026-11-21T23:40:10Z", "reason": "KubeletReady",
             "message": "kubelet is posting ready status"},
        ],
        "addresses": [{"type": "InternalIP", "address": "172.18.0.2"},
                      {"type": "Hostname", "address": "node-1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "0d2d1b5f4a2c4e0b9f0e1d2c3b4a5968",
            "systemUUID": "4c4c4544-0042-3510-8052-b4c04f4d3232",
            "bootID": "e7f3a1d2-6c0b-4b8e-9d0a-3f2e1c0b9a87", "kernelVersion": "6.8.0-45-generic",
            "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "docker://27.3.1",
            "kubeletVersion": "v1.31.0-minik8s", "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64",
        },
        "images": [{"names": ["docker.io/library/nginx@sha256:abc", "docker.io/library/nginx:1.27"],
                    "sizeBytes": 72955450}],
    },
}

EVENT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "web-0.17f9a2b3c4d5e6f7", "namespace": "default",
                 "creationTimestamp": "2026-11-21T23:47:31Z", "resourceVersion": "1051",
                 "uid": "5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b"},
    "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "web-0", "namespace": "default",
                       "resourceVersion": "1040", "uid": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d",
                       "fieldPath": "spec.containers{web}"},
    "reason": "Pulled",
    "message": 'Container image "nginx:1.27" already present on machine',
    "source": {"component": "kubelet", "host": "node-1"},
    "firstTimestamp": "2026-11-21T23:47:31Z",
    "lastTimestamp": "2026-11-21T23:48:01Z",
    "count": 3,
    "type": "Normal",
    "eventTime": "2026-11-21T23:47:31.123456Z",
    "series": {"count": 2, "lastObservedTime": "2026-11-21T23:48:01.000001Z"},
    "action": "Pulling",
    "related": {"kind": "Node", "name": "node-1"},
    "reportingComponent": "kubelet",
    "reportingInstance": "node-1",
}

LEASE: dict[str, Any] = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "node-1", "namespace": "kube-node-lease",
                 "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-1",
                                      "uid": "3f2e1d0c-9b8a-4766-a5b4-c3d2e1f0a9b8"}]},
    "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40,
             "acquireTime": "2026-11-21T23:40:00.000000Z", "renewTime": "2026-11-21T23:47:31.654321Z",
             "leaseTransitions": 0},
}

NAMESPACE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Namespace",
    "metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}},
    "spec": {"finalizers": ["kubernetes"]},
    "status": {"phase": "Terminating",
               "conditions": [{"type": "NamespaceDeletionDiscoveryFailure", "status": "False",
                               "lastTransitionTime": "2026-11-21T23:47:31Z", "reason": "ResourcesDiscovered",
                               "message": "All resources successfully discovered"}]},
}

BINDING: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Binding",
    "metadata": {"name": "web-0", "namespace": "default", "uid": "9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d"},
    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
}

SCALE: dict[str, Any] = {
    "apiVersion": "autoscaling/v1", "kind": "Scale",
    "metadata": {"name": "nginx-deployment", "namespace": "default", "resourceVersion": "1042"},
    "spec": {"replicas": 5},
    "status": {"replicas": 3, "selector": "app=nginx"},
}


def _drop_nulls(value: Any) -> Any:
    """What the wire form looks like with Go's omitempty: null fields left out."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


ROUND_TRIPS: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (apps_v1.Deployment, NGINX_DEPLOYMENT),
    (apps_v1.Deployment, NGINX_DEPLOYMENT_STORED),
    (apps_v1.ReplicaSet, REPLICASET),
    (core_v1.Pod, POD),
    (core_v1.Node, NODE),
    (core_v1.Event, EVENT),
    (core_v1.Namespace, NAMESPACE),
    (core_v1.Binding, BINDING),
    (coordination_v1.Lease, LEASE),
    (autoscaling_v1.Scale, SCALE),
]


@pytest.mark.parametrize(("model", "manifest"), ROUND_TRIPS,
                         ids=[f"{m.__name__}-{i}" for i, (m, _) in enumerate(ROUND_TRIPS)])
def test_round_trip(model: Any, manifest: dict[str, Any]) -> None:
    original = copy.deepcopy(manifest)
    obj = model.from_dict(manifest)
    assert obj.to_dict() == _drop_nulls(original)
    assert manifest == original  # input untouched
    # and again from our own output, and through JSON
    assert model.from_dict(obj.to_dict()).to_dict() == obj.to_dict()
    assert model.model_validate_json(obj.model_dump_json(by_alias=True, exclude_none=True)) == obj


def test_irregular_wire_names() -> None:
    pod = core_v1.Pod.from_dict(POD)
    assert pod.status is not None and pod.spec is not None
    assert pod.status.pod_ip == "10.244.1.5"
    assert pod.status.host_ip == "172.18.0.2"
    assert pod.status.container_statuses is not None
    assert pod.status.container_statuses[1].image_id == ""
    assert pod.spec.host_pid is False and pod.spec.host_ipc is False
    node = core_v1.Node.from_dict(NODE)
    assert node.spec is not None and node.status is not None
    assert node.spec.pod_cidr == "10.244.1.0/24" and node.spec.provider_id == "docker://node-1"
    assert node.status.daemon_endpoints is not None
    assert node.status.daemon_endpoints.kubelet_endpoint is not None
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert node.status.node_info is not None and node.status.node_info.system_uuid.startswith("4c4c")
    # built from Python names, written with the wire names
    status = core_v1.PodStatus(pod_ip="10.0.0.1", host_ip="10.0.0.2", pod_ips=[core_v1.PodIP(ip="10.0.0.1")])
    assert status.to_dict() == {"podIP": "10.0.0.1", "hostIP": "10.0.0.2", "podIPs": [{"ip": "10.0.0.1"}]}
    ep = core_v1.DaemonEndpoint(port=10250)
    assert ep.to_dict() == {"Port": 10250}


def test_defaults_of_top_level_kinds() -> None:
    assert core_v1.Pod().to_dict() == {"apiVersion": "v1", "kind": "Pod", "metadata": {}}
    assert apps_v1.Deployment().to_dict() == {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}
    assert coordination_v1.Lease().to_dict()["apiVersion"] == "coordination.k8s.io/v1"
    assert autoscaling_v1.Scale().to_dict()["apiVersion"] == "autoscaling/v1"


def test_quantities_keep_their_form() -> None:
    req = core_v1.ResourceRequirements.from_dict({"limits": {"cpu": 1, "memory": "64Mi", "x": 0.5}})
    assert req.limits == {"cpu": 1, "memory": "64Mi", "x": 0.5}
    assert req.to_dict() == {"limits": {"cpu": 1, "memory": "64Mi", "x": 0.5}}


def _error_locs(exc: ValidationError) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in exc.errors()]


@pytest.mark.parametrize(("model", "manifest", "loc"), [
    (core_v1.Pod, {"spec": {"containers": [{"name": "a", "imagePullPolicy": "Always", "imagee": "x"}]}},
     ("spec", "containers", 0, "imagee")),
    (core_v1.Pod, {"spec": {"containers": [{"name": "a"}], "hostPid": True}}, ("spec", "hostPid")),
    (core_v1.Node, {"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 10250, "PORT": 1}}}},
     ("status", "daemonEndpoints", "kubeletEndpoint", "PORT")),
    (core_v1.Node, {"spec": {"podCidr": "10.244.0.0/24"}}, ("spec", "podCidr")),
    (core_v1.Pod, {"status": {"podIp": "10.0.0.1"}}, ("status", "podIp")),
    (apps_v1.Deployment, {"spec": {"selector": {}, "template": {}, "replica": 3}}, ("spec", "replica")),
    (core_v1.Event, {"involvedObject": {}, "bogus": 1}, ("bogus",)),
    (coordination_v1.Lease, {"spec": {"holder": "x"}}, ("spec", "holder")),
])
def test_unknown_fields_rejected(model: Any, manifest: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        model.from_dict(manifest)
    errors = info.value.errors()
    assert loc in _error_locs(info.value)
    assert any(e["type"] == "extra_forbidden" for e in errors)


@pytest.mark.parametrize(("model", "manifest", "loc"), [
    (apps_v1.Deployment, {"spec": {"replicas": "3", "selector": {}, "template": {}}}, ("spec", "replicas")),
    (apps_v1.Deployment, {"spec": {"replicas": True, "selector": {}, "template": {}}}, ("spec", "replicas")),
    (core_v1.Pod, {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "80"}]}]}},
     ("spec", "containers", 0, "ports", 0, "containerPort")),
    (core_v1.Pod, {"spec": {"containers": [{"name": "a", "command": "sleep 10"}]}},
     ("spec", "containers", 0, "command")),
    (core_v1.Pod, {"spec": {"containers": [], "hostNetwork": "true"}}, ("spec", "hostNetwork")),
    (core_v1.Pod, {"status": {"podIP": 17}}, ("status", "podIP")),
    (core_v1.Pod, {"metadata": {"labels": {"app": 1}}}, ("metadata", "labels", "app")),
    (core_v1.Pod, {"kind": "Service"}, ("kind",)),
    (apps_v1.Deployment, {"apiVersion": "extensions/v1beta1"}, ("apiVersion",)),
    (coordination_v1.Lease, {"spec": {"leaseDurationSeconds": 40.0}}, ("spec", "leaseDurationSeconds")),
])
def test_wrong_types_rejected(model: Any, manifest: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        model.from_dict(manifest)
    assert any(got[: len(loc)] == loc for got in _error_locs(info.value)), _error_locs(info.value)


@pytest.mark.parametrize(("model", "manifest", "loc"), [
    (core_v1.Pod, {"spec": {"containers": [{"image": "nginx"}]}}, ("spec", "containers", 0, "name")),
    (core_v1.Pod, {"spec": {}}, ("spec", "containers")),
    (apps_v1.Deployment, {"spec": {"replicas": 1, "template": {}}}, ("spec", "selector")),
    (apps_v1.Deployment, {"spec": {"selector": {}}}, ("spec", "template")),
    (core_v1.Event, {}, ("involvedObject",)),
    (core_v1.Binding, {}, ("target",)),
    (autoscaling_v1.Scale, {"status": {"selector": "app=x"}}, ("status", "replicas")),
])
def test_required_fields(model: Any, manifest: dict[str, Any], loc: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        model.from_dict(manifest)
    assert loc in _error_locs(info.value)


def test_merge_keys_in_schema() -> None:
    def key(model: type[BaseModel], field: str) -> str | None:
        extra = model.model_fields[field].json_schema_extra
        assert extra is None or isinstance(extra, dict)
        return None if extra is None else extra.get("x-kubernetes-patch-merge-key")  # type: ignore[return-value]

    assert key(core_v1.PodSpec, "containers") == "name"
    assert key(core_v1.PodSpec, "init_containers") == "name"
    assert key(core_v1.PodSpec, "volumes") == "name"
    assert key(core_v1.PodSpec, "image_pull_secrets") == "name"
    assert key(core_v1.PodSpec, "host_aliases") == "ip"
    assert key(core_v1.PodSpec, "tolerations") is None
    assert key(core_v1.Container, "env") == "name"
    assert key(core_v1.Container, "ports") == "containerPort"
    assert key(core_v1.Container, "volume_mounts") == "mountPath"
    assert key(core_v1.PodStatus, "conditions") == "type"
    assert key(core_v1.PodStatus, "pod_ips") == "ip"
    assert key(core_v1.NodeStatus, "conditions") == "type"
    assert key(core_v1.NodeStatus, "addresses") == "type"
    assert key(core_v1.NodeSpec, "taints") is None
    assert key(apps_v1.DeploymentStatus, "conditions") == "type"
    assert key(apps_v1.ReplicaSetStatus, "conditions") == "type"
    schema = core_v1.Pod.model_json_schema(by_alias=True)
    assert schema["$defs"]["PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"] == "name"
    assert "hostPID" in schema["$defs"]["PodSpec"]["properties"]
