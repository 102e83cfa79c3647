"""Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) → our JSON dict form.

kubectl 1.32+ sends the objects its typed clients build (`create deployment|namespace|role|rolebinding|
clusterrole|clusterrolebinding|service|configmap|secret`, `auth reconcile`, `auth can-i`) as protobuf,
whatever else it speaks JSON; it reads JSON answers by their Content-Type, so only request bodies are decoded here.

The wire form (apimachinery runtime/serializer/protobuf): the magic `k8s\\x00`, then a runtime.Unknown
{typeMeta{apiVersion = 1, kind = 2} = 1, raw = 2, contentEncoding = 3, contentType = 4} whose `raw` is
the typed message of k8s.io/api's generated.proto. A hand-written wire decoder walks `raw` with the
declarative table SCHEMA below: per message, "number jsonName:type; ...", upstream's field numbers.
Types: str, bool, int (int32/int64, two's complement), bytes (base64 in JSON), time / microtime
(meta/v1 Time{seconds, nanos} → RFC 3339), quantity (Quantity{string}), intorstr (IntOrString{type,
intVal, strVal}), fieldsv1 (FieldsV1{Raw} → JSON), extra (authorization ExtraValue{items} → a list),
or a message of the table. `[T]` is repeated, `{T}` a map (repeated {key = 1, value = 2} entries),
`Msg*` an embedded Go struct whose fields sit inline in the parent's JSON (`json:",inline"`).

Go's marshaller writes every non-pointer scalar, zero or not, and JSON's `omitempty` then drops the
zero ones; a pointer (`*int32 replicas`) is written only when set, and its zero means something. So a
zero scalar is dropped unless its type ends in `?` (upstream's pointer fields). Field numbers the table
does not list are skipped, as upstream's decoder skips unknown fields; the table lists the fields our
models carry (machinery.api), so what is skipped is what our JSON schema would not accept anyway.
tests/unit/apiserver/test_protobuf.py checks every entry against the descriptors compiled into a kubectl binary.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from machinery.timeutil import format_rfc3339, format_rfc3339_micro

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

SCHEMA: dict[str, str] = {
    "Namespace": "1 metadata:ObjectMeta; 2 spec:NamespaceSpec; 3 status:NamespaceStatus",
    "ObjectMeta": (
        "1 name:str; 2 generateName:str; 3 namespace:str; 4 selfLink:str; 5 uid:str; 6 resourceVersion:str; "
        "7 generation:int; 8 creationTimestamp:time; 9 deletionTimestamp:time; 10 deletionGracePeriodSeconds:int?; "
        "11 labels:{str}; 12 annotations:{str}; 13 ownerReferences:[OwnerReference]; 14 finalizers:[str]; "
        "17 managedFields:[ManagedFieldsEntry]"),
    "OwnerReference": (
        "5 apiVersion:str; 1 kind:str; 3 name:str; 4 uid:str; 6 controller:bool?; 7 blockOwnerDeletion:bool?"),
    "ManagedFieldsEntry": (
        "1 manager:str; 2 operation:str; 3 apiVersion:str; 4 time:time; 6 fieldsType:str; 7 fieldsV1:fieldsv1; "
        "8 subresource:str"),
    "NamespaceSpec": "1 finalizers:[str]",
    "NamespaceStatus": "1 phase:str; 2 conditions:[NamespaceCondition]",
    "NamespaceCondition": "1 type:str; 2 status:str; 4 lastTransitionTime:time; 5 reason:str; 6 message:str",
    "Node": "1 metadata:ObjectMeta; 2 spec:NodeSpec; 3 status:NodeStatus",
    "NodeSpec": (
        "1 podCIDR:str; 7 podCIDRs:[str]; 3 providerID:str; 4 unschedulable:bool; 5 taints:[Taint]; "
        "6 configSource:NodeConfigSource; 2 externalID:str"),
    "Taint": "1 key:str; 2 value:str; 3 effect:str; 4 timeAdded:time",
    "NodeConfigSource": "2 configMap:ConfigMapNodeConfigSource",
    "ConfigMapNodeConfigSource": (
        "1 namespace:str; 2 name:str; 3 uid:str; 4 resourceVersion:str; 5 kubeletConfigKey:str"),
    "NodeStatus": (
        "1 capacity:{quantity}; 2 allocatable:{quantity}; 3 phase:str; 4 conditions:[NodeCondition]; "
        "5 addresses:[NodeAddress]; 6 daemonEndpoints:NodeDaemonEndpoints; 7 nodeInfo:NodeSystemInfo; "
        "8 images:[ContainerImage]; 9 volumesInUse:[str]; 10 volumesAttached:[AttachedVolume]; "
        "11 config:NodeConfigStatus; 12 runtimeHandlers:[NodeRuntimeHandler]; 13 features:NodeFeatures"),
    "NodeCondition": (
        "1 type:str; 2 status:str; 3 lastHeartbeatTime:time; 4 lastTransitionTime:time; 5 reason:str; 6 message:str"),
    "NodeAddress": "1 type:str; 2 address:str",
    "NodeDaemonEndpoints": "1 kubeletEndpoint:DaemonEndpoint",
    "DaemonEndpoint": "1 Port:int",
    "NodeSystemInfo": (
        "1 machineID:str; 2 systemUUID:str; 3 bootID:str; 4 kernelVersion:str; 5 osImage:str; "
        "6 containerRuntimeVersion:str; 7 kubeletVersion:str; 8 kubeProxyVersion:str; 9 operatingSystem:str; "
        "10 architecture:str; 11 swap:NodeSwapStatus"),
    "NodeSwapStatus": "1 capacity:int?",
    "ContainerImage": "1 names:[str]; 2 sizeBytes:int",
    "AttachedVolume": "1 name:str; 2 devicePath:str",
    "NodeConfigStatus": (
        "1 assigned:NodeConfigSource; 2 active:NodeConfigSource; 3 lastKnownGood:NodeConfigSource; 4 error:str"),
    "NodeRuntimeHandler": "1 name:str; 2 features:NodeRuntimeHandlerFeatures",
    "NodeRuntimeHandlerFeatures": "1 recursiveReadOnlyMounts:bool?; 2 userNamespaces:bool?",
    "NodeFeatures": "1 supplementalGroupsPolicy:bool?",
    "Pod": "1 metadata:ObjectMeta; 2 spec:PodSpec; 3 status:PodStatus",
    "PodSpec": (
        "1 volumes:[Volume]; 20 initContainers:[Container]; 2 containers:[Container]; "
        "34 ephemeralContainers:[EphemeralContainer]; 3 restartPolicy:str; 4 terminationGracePeriodSeconds:int?; "
        "5 activeDeadlineSeconds:int?; 6 dnsPolicy:str; 7 nodeSelector:{str}; 8 serviceAccountName:str; "
        "9 serviceAccount:str; 21 automountServiceAccountToken:bool?; 10 nodeName:str; 11 hostNetwork:bool; "
        "12 hostPID:bool; 13 hostIPC:bool; 27 shareProcessNamespace:bool?; 14 securityContext:PodSecurityContext; "
        "15 imagePullSecrets:[LocalObjectReference]; 16 hostname:str; 17 subdomain:str; 18 affinity:Affinity; "
        "19 schedulerName:str; 22 tolerations:[Toleration]; 23 hostAliases:[HostAlias]; 24 priorityClassName:str; "
        "25 priority:int?; 26 dnsConfig:PodDNSConfig; 28 readinessGates:[PodReadinessGate]; 29 runtimeClassName:str?; "
        "30 enableServiceLinks:bool?; 31 preemptionPolicy:str?; 32 overhead:{quantity}; "
        "33 topologySpreadConstraints:[TopologySpreadConstraint]; 35 setHostnameAsFQDN:bool?; 36 os:PodOS; "
        "37 hostUsers:bool?; 38 schedulingGates:[PodSchedulingGate]; 39 resourceClaims:[PodResourceClaim]; "
        "40 resources:ResourceRequirements"),
    "Volume": "1 name:str; 2 volumeSource:VolumeSource*",
    "VolumeSource": (
        "1 hostPath:HostPathVolumeSource; 2 emptyDir:EmptyDirVolumeSource; 6 secret:SecretVolumeSource; "
        "7 nfs:NFSVolumeSource; 10 persistentVolumeClaim:PersistentVolumeClaimVolumeSource; "
        "16 downwardAPI:DownwardAPIVolumeSource; 19 configMap:ConfigMapVolumeSource; "
        "26 projected:ProjectedVolumeSource; 28 csi:CSIVolumeSource; 29 ephemeral:EphemeralVolumeSource; "
        "30 image:ImageVolumeSource"),
    "HostPathVolumeSource": "1 path:str; 2 type:str?",
    "EmptyDirVolumeSource": "1 medium:str; 2 sizeLimit:quantity",
    "SecretVolumeSource": "1 secretName:str; 2 items:[KeyToPath]; 3 defaultMode:int?; 4 optional:bool?",
    "KeyToPath": "1 key:str; 2 path:str; 3 mode:int?",
    "NFSVolumeSource": "1 server:str; 2 path:str; 3 readOnly:bool",
    "PersistentVolumeClaimVolumeSource": "1 claimName:str; 2 readOnly:bool",
    "DownwardAPIVolumeSource": "1 items:[DownwardAPIVolumeFile]; 2 defaultMode:int?",
    "DownwardAPIVolumeFile": (
        "1 path:str; 2 fieldRef:ObjectFieldSelector; 3 resourceFieldRef:ResourceFieldSelector; 4 mode:int?"),
    "ObjectFieldSelector": "1 apiVersion:str; 2 fieldPath:str",
    "ResourceFieldSelector": "1 containerName:str; 2 resource:str; 3 divisor:quantity",
    "ConfigMapVolumeSource": (
        "1 localObjectReference:LocalObjectReference*; 2 items:[KeyToPath]; 3 defaultMode:int?; 4 optional:bool?"),
    "LocalObjectReference": "1 name:str",
    "ProjectedVolumeSource": "1 sources:[VolumeProjection]; 2 defaultMode:int?",
    "VolumeProjection": (
        "1 secret:SecretProjection; 2 downwardAPI:DownwardAPIProjection; 3 configMap:ConfigMapProjection; "
        "4 serviceAccountToken:ServiceAccountTokenProjection; 5 clusterTrustBundle:ClusterTrustBundleProjection"),
    "SecretProjection": "1 localObjectReference:LocalObjectReference*; 2 items:[KeyToPath]; 4 optional:bool?",
    "DownwardAPIProjection": "1 items:[DownwardAPIVolumeFile]",
    "ConfigMapProjection": "1 localObjectReference:LocalObjectReference*; 2 items:[KeyToPath]; 4 optional:bool?",
    "ServiceAccountTokenProjection": "1 audience:str; 2 expirationSeconds:int?; 3 path:str",
    "ClusterTrustBundleProjection": (
        "1 name:str?; 2 signerName:str?; 3 labelSelector:LabelSelector; 5 optional:bool?; 4 path:str"),
    "LabelSelector": "1 matchLabels:{str}; 2 matchExpressions:[LabelSelectorRequirement]",
    "LabelSelectorRequirement": "1 key:str; 2 operator:str; 3 values:[str]",
    "CSIVolumeSource": (
        "1 driver:str; 2 readOnly:bool?; 3 fsType:str?; 4 volumeAttributes:{str}; "
        "5 nodePublishSecretRef:LocalObjectReference"),
    "EphemeralVolumeSource": "1 volumeClaimTemplate:PersistentVolumeClaimTemplate",
    "PersistentVolumeClaimTemplate": "1 metadata:ObjectMeta; 2 spec:PersistentVolumeClaimSpec",
    "PersistentVolumeClaimSpec": (
        "1 accessModes:[str]; 4 selector:LabelSelector; 2 resources:VolumeResourceRequirements; 3 volumeName:str; "
        "5 storageClassName:str?; 6 volumeMode:str?; 7 dataSource:TypedLocalObjectReference; "
        "8 dataSourceRef:TypedObjectReference; 9 volumeAttributesClassName:str?"),
    "VolumeResourceRequirements": "1 limits:{quantity}; 2 requests:{quantity}",
    "TypedLocalObjectReference": "1 apiGroup:str?; 2 kind:str; 3 name:str",
    "TypedObjectReference": "1 apiGroup:str?; 2 kind:str; 3 name:str; 4 namespace:str?",
    "ImageVolumeSource": "1 reference:str; 2 pullPolicy:str",
    "Container": (
        "1 name:str; 2 image:str; 3 command:[str]; 4 args:[str]; 5 workingDir:str; 6 ports:[ContainerPort]; "
        "19 envFrom:[EnvFromSource]; 7 env:[EnvVar]; 8 resources:ResourceRequirements; "
        "23 resizePolicy:[ContainerResizePolicy]; 24 restartPolicy:str?; 9 volumeMounts:[VolumeMount]; "
        "21 volumeDevices:[VolumeDevice]; 10 livenessProbe:Probe; 11 readinessProbe:Probe; 22 startupProbe:Probe; "
        "12 lifecycle:Lifecycle; 13 terminationMessagePath:str; 20 terminationMessagePolicy:str; "
        "14 imagePullPolicy:str; 15 securityContext:SecurityContext; 16 stdin:bool; 17 stdinOnce:bool; 18 tty:bool"),
    "ContainerPort": "1 name:str; 2 hostPort:int; 3 containerPort:int; 4 protocol:str; 5 hostIP:str",
    "EnvFromSource": "1 prefix:str; 2 configMapRef:ConfigMapEnvSource; 3 secretRef:SecretEnvSource",
    "ConfigMapEnvSource": "1 localObjectReference:LocalObjectReference*; 2 optional:bool?",
    "SecretEnvSource": "1 localObjectReference:LocalObjectReference*; 2 optional:bool?",
    "EnvVar": "1 name:str; 2 value:str; 3 valueFrom:EnvVarSource",
    "EnvVarSource": (
        "1 fieldRef:ObjectFieldSelector; 2 resourceFieldRef:ResourceFieldSelector; "
        "3 configMapKeyRef:ConfigMapKeySelector; 4 secretKeyRef:SecretKeySelector"),
    "ConfigMapKeySelector": "1 localObjectReference:LocalObjectReference*; 2 key:str; 3 optional:bool?",
    "SecretKeySelector": "1 localObjectReference:LocalObjectReference*; 2 key:str; 3 optional:bool?",
    "ResourceRequirements": "1 limits:{quantity}; 2 requests:{quantity}; 3 claims:[ResourceClaim]",
    "ResourceClaim": "1 name:str; 2 request:str",
    "ContainerResizePolicy": "1 resourceName:str; 2 restartPolicy:str",
    "VolumeMount": (
        "1 name:str; 2 readOnly:bool; 7 recursiveReadOnly:str?; 3 mountPath:str; 4 subPath:str; "
        "5 mountPropagation:str?; 6 subPathExpr:str"),
    "VolumeDevice": "1 name:str; 2 devicePath:str",
    "Probe": (
        "1 handler:ProbeHandler*; 2 initialDelaySeconds:int; 3 timeoutSeconds:int; 4 periodSeconds:int; "
        "5 successThreshold:int; 6 failureThreshold:int; 7 terminationGracePeriodSeconds:int?"),
    "ProbeHandler": "1 exec:ExecAction; 2 httpGet:HTTPGetAction; 3 tcpSocket:TCPSocketAction; 4 grpc:GRPCAction",
    "ExecAction": "1 command:[str]",
    "HTTPGetAction": "1 path:str; 2 port:intorstr; 3 host:str; 4 scheme:str; 5 httpHeaders:[HTTPHeader]",
    "HTTPHeader": "1 name:str; 2 value:str",
    "TCPSocketAction": "1 port:intorstr; 2 host:str",
    "GRPCAction": "1 port:int; 2 service:str",
    "Lifecycle": "1 postStart:LifecycleHandler; 2 preStop:LifecycleHandler; 3 stopSignal:str?",
    "LifecycleHandler": "1 exec:ExecAction; 2 httpGet:HTTPGetAction; 3 tcpSocket:TCPSocketAction; 4 sleep:SleepAction",
    "SleepAction": "1 seconds:int",
    "SecurityContext": (
        "1 capabilities:Capabilities; 2 privileged:bool?; 3 seLinuxOptions:SELinuxOptions; "
        "10 windowsOptions:WindowsSecurityContextOptions; 4 runAsUser:int?; 8 runAsGroup:int?; 5 runAsNonRoot:bool?; "
        "6 readOnlyRootFilesystem:bool?; 7 allowPrivilegeEscalation:bool?; 9 procMount:str?; "
        "11 seccompProfile:SeccompProfile; 12 appArmorProfile:AppArmorProfile"),
    "Capabilities": "1 add:[str]; 2 drop:[str]",
    "SELinuxOptions": "1 user:str; 2 role:str; 3 type:str; 4 level:str",
    "WindowsSecurityContextOptions": (
        "1 gmsaCredentialSpecName:str?; 2 gmsaCredentialSpec:str?; 3 runAsUserName:str?; 4 hostProcess:bool?"),
    "SeccompProfile": "1 type:str; 2 localhostProfile:str?",
    "AppArmorProfile": "1 type:str; 2 localhostProfile:str?",
    "EphemeralContainer": "1 ephemeralContainerCommon:EphemeralContainerCommon*; 2 targetContainerName:str",
    "EphemeralContainerCommon": (
        "1 name:str; 2 image:str; 3 command:[str]; 4 args:[str]; 5 workingDir:str; 6 ports:[ContainerPort]; "
        "19 envFrom:[EnvFromSource]; 7 env:[EnvVar]; 8 resources:ResourceRequirements; "
        "23 resizePolicy:[ContainerResizePolicy]; 24 restartPolicy:str?; 9 volumeMounts:[VolumeMount]; "
        "21 volumeDevices:[VolumeDevice]; 10 livenessProbe:Probe; 11 readinessProbe:Probe; 22 startupProbe:Probe; "
        "12 lifecycle:Lifecycle; 13 terminationMessagePath:str; 20 terminationMessagePolicy:str; "
        "14 imagePullPolicy:str; 15 securityContext:SecurityContext; 16 stdin:bool; 17 stdinOnce:bool; 18 tty:bool"),
    "PodSecurityContext": (
        "1 seLinuxOptions:SELinuxOptions; 8 windowsOptions:WindowsSecurityContextOptions; 2 runAsUser:int?; "
        "6 runAsGroup:int?; 3 runAsNonRoot:bool?; 4 supplementalGroups:[int]; 12 supplementalGroupsPolicy:str?; "
        "5 fsGroup:int?; 7 sysctls:[Sysctl]; 9 fsGroupChangePolicy:str?; 10 seccompProfile:SeccompProfile; "
        "11 appArmorProfile:AppArmorProfile; 13 seLinuxChangePolicy:str?"),
    "Sysctl": "1 name:str; 2 value:str",
    "Affinity": "1 nodeAffinity:NodeAffinity; 2 podAffinity:PodAffinity; 3 podAntiAffinity:PodAntiAffinity",
    "NodeAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution:NodeSelector; "
        "2 preferredDuringSchedulingIgnoredDuringExecution:[PreferredSchedulingTerm]"),
    "NodeSelector": "1 nodeSelectorTerms:[NodeSelectorTerm]",
    "NodeSelectorTerm": "1 matchExpressions:[NodeSelectorRequirement]; 2 matchFields:[NodeSelectorRequirement]",
    "NodeSelectorRequirement": "1 key:str; 2 operator:str; 3 values:[str]",
    "PreferredSchedulingTerm": "1 weight:int; 2 preference:NodeSelectorTerm",
    "PodAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm]; "
        "2 preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm]"),
    "PodAffinityTerm": (
        "1 labelSelector:LabelSelector; 2 namespaces:[str]; 3 topologyKey:str; 4 namespaceSelector:LabelSelector; "
        "5 matchLabelKeys:[str]; 6 mismatchLabelKeys:[str]"),
    "WeightedPodAffinityTerm": "1 weight:int; 2 podAffinityTerm:PodAffinityTerm",
    "PodAntiAffinity": (
        "1 requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm]; "
        "2 preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm]"),
    "Toleration": "1 key:str; 2 operator:str; 3 value:str; 4 effect:str; 5 tolerationSeconds:int?",
    "HostAlias": "1 ip:str; 2 hostnames:[str]",
    "PodDNSConfig": "1 nameservers:[str]; 2 searches:[str]; 3 options:[PodDNSConfigOption]",
    "PodDNSConfigOption": "1 name:str; 2 value:str",
    "PodReadinessGate": "1 conditionType:str",
    "TopologySpreadConstraint": (
        "1 maxSkew:int; 2 topologyKey:str; 3 whenUnsatisfiable:str; 4 labelSelector:LabelSelector; 5 minDomains:int?; "
        "6 nodeAffinityPolicy:str?; 7 nodeTaintsPolicy:str?; 8 matchLabelKeys:[str]"),
    "PodOS": "1 name:str",
    "PodSchedulingGate": "1 name:str",
    "PodResourceClaim": "1 name:str; 3 resourceClaimName:str?; 4 resourceClaimTemplateName:str?",
    "PodStatus": (
        "17 observedGeneration:int; 1 phase:str; 2 conditions:[PodCondition]; 3 message:str; 4 reason:str; "
        "11 nominatedNodeName:str; 5 hostIP:str; 16 hostIPs:[HostIP]; 6 podIP:str; 12 podIPs:[PodIP]; "
        "7 startTime:time; 10 initContainerStatuses:[ContainerStatus]; 8 containerStatuses:[ContainerStatus]; "
        "9 qosClass:str; 13 ephemeralContainerStatuses:[ContainerStatus]; 14 resize:str; "
        "15 resourceClaimStatuses:[PodResourceClaimStatus]"),
    "PodCondition": (
        "1 type:str; 7 observedGeneration:int; 2 status:str; 3 lastProbeTime:time; 4 lastTransitionTime:time; "
        "5 reason:str; 6 message:str"),
    "HostIP": "1 ip:str",
    "PodIP": "1 ip:str",
    "ContainerStatus": (
        "1 name:str; 2 state:ContainerState; 3 lastState:ContainerState; 4 ready:bool; 5 restartCount:int; "
        "6 image:str; 7 imageID:str; 8 containerID:str; 9 started:bool?; 10 allocatedResources:{quantity}; "
        "11 resources:ResourceRequirements; 12 volumeMounts:[VolumeMountStatus]; 13 user:ContainerUser; "
        "14 allocatedResourcesStatus:[ResourceStatus]; 15 stopSignal:str?"),
    "ContainerState": (
        "1 waiting:ContainerStateWaiting; 2 running:ContainerStateRunning; 3 terminated:ContainerStateTerminated"),
    "ContainerStateWaiting": "1 reason:str; 2 message:str",
    "ContainerStateRunning": "1 startedAt:time",
    "ContainerStateTerminated": (
        "1 exitCode:int; 2 signal:int; 3 reason:str; 4 message:str; 5 startedAt:time; 6 finishedAt:time; "
        "7 containerID:str"),
    "VolumeMountStatus": "1 name:str; 2 mountPath:str; 3 readOnly:bool; 4 recursiveReadOnly:str",
    "ContainerUser": "1 linux:LinuxContainerUser",
    "LinuxContainerUser": "1 uid:int; 2 gid:int; 3 supplementalGroups:[int]",
    "ResourceStatus": "1 name:str; 2 resources:[ResourceHealth]",
    "ResourceHealth": "1 resourceID:str; 2 health:str",
    "PodResourceClaimStatus": "1 name:str; 2 resourceClaimName:str",
    "Event": (
        "1 metadata:ObjectMeta; 2 involvedObject:ObjectReference; 3 reason:str; 4 message:str; 5 source:EventSource; "
        "6 firstTimestamp:time; 7 lastTimestamp:time; 8 count:int; 9 type:str; 10 eventTime:microtime; "
        "11 series:EventSeries; 12 action:str; 13 related:ObjectReference; 14 reportingComponent:str; "
        "15 reportingInstance:str"),
    "ObjectReference": (
        "1 kind:str; 2 namespace:str; 3 name:str; 4 uid:str; 5 apiVersion:str; 6 resourceVersion:str; "
        "7 fieldPath:str"),
    "EventSource": "1 component:str; 2 host:str",
    "EventSeries": "1 count:int; 2 lastObservedTime:microtime",
    "ServiceAccount": (
        "1 metadata:ObjectMeta; 2 secrets:[ObjectReference]; 3 imagePullSecrets:[LocalObjectReference]; "
        "4 automountServiceAccountToken:bool?"),
    "TokenRequest": "1 metadata:ObjectMeta; 2 spec:TokenRequestSpec; 3 status:TokenRequestStatus",
    "TokenRequestSpec": "1 audiences:[str]; 4 expirationSeconds:int?; 3 boundObjectRef:BoundObjectReference",
    "BoundObjectReference": "1 kind:str; 2 apiVersion:str; 3 name:str; 4 uid:str",
    "TokenRequestStatus": "1 token:str; 2 expirationTimestamp:time",
    "Deployment": "1 metadata:ObjectMeta; 2 spec:DeploymentSpec; 3 status:DeploymentStatus",
    "DeploymentSpec": (
        "1 replicas:int?; 2 selector:LabelSelector; 3 template:PodTemplateSpec; 4 strategy:DeploymentStrategy; "
        "5 minReadySeconds:int; 6 revisionHistoryLimit:int?; 7 paused:bool; 9 progressDeadlineSeconds:int?"),
    "PodTemplateSpec": "1 metadata:ObjectMeta; 2 spec:PodSpec",
    "DeploymentStrategy": "1 type:str; 2 rollingUpdate:RollingUpdateDeployment",
    "RollingUpdateDeployment": "1 maxUnavailable:intorstr; 2 maxSurge:intorstr",
    "DeploymentStatus": (
        "1 observedGeneration:int; 2 replicas:int; 3 updatedReplicas:int; 7 readyReplicas:int; "
        "4 availableReplicas:int; 5 unavailableReplicas:int; 9 terminatingReplicas:int?; "
        "6 conditions:[DeploymentCondition]; 8 collisionCount:int?"),
    "DeploymentCondition": (
        "1 type:str; 2 status:str; 6 lastUpdateTime:time; 7 lastTransitionTime:time; 4 reason:str; 5 message:str"),
    "ReplicaSet": "1 metadata:ObjectMeta; 2 spec:ReplicaSetSpec; 3 status:ReplicaSetStatus",
    "ReplicaSetSpec": "1 replicas:int?; 4 minReadySeconds:int; 2 selector:LabelSelector; 3 template:PodTemplateSpec",
    "ReplicaSetStatus": (
        "1 replicas:int; 2 fullyLabeledReplicas:int; 4 readyReplicas:int; 5 availableReplicas:int; "
        "7 terminatingReplicas:int?; 3 observedGeneration:int; 6 conditions:[ReplicaSetCondition]"),
    "ReplicaSetCondition": "1 type:str; 2 status:str; 3 lastTransitionTime:time; 4 reason:str; 5 message:str",
    "Lease": "1 metadata:ObjectMeta; 2 spec:LeaseSpec",
    "LeaseSpec": (
        "1 holderIdentity:str?; 2 leaseDurationSeconds:int?; 3 acquireTime:microtime; 4 renewTime:microtime; "
        "5 leaseTransitions:int?; 6 strategy:str?; 7 preferredHolder:str?"),
    "ClusterRole": "1 metadata:ObjectMeta; 2 rules:[PolicyRule]; 3 aggregationRule:AggregationRule",
    "PolicyRule": "1 verbs:[str]; 2 apiGroups:[str]; 3 resources:[str]; 4 resourceNames:[str]; 5 nonResourceURLs:[str]",
    "AggregationRule": "1 clusterRoleSelectors:[LabelSelector]",
    "ClusterRoleBinding": "1 metadata:ObjectMeta; 2 subjects:[Subject]; 3 roleRef:RoleRef",
    "Subject": "1 kind:str; 2 apiGroup:str; 3 name:str; 4 namespace:str",
    "RoleRef": "1 apiGroup:str; 2 kind:str; 3 name:str",
    "Role": "1 metadata:ObjectMeta; 2 rules:[PolicyRule]",
    "RoleBinding": "1 metadata:ObjectMeta; 2 subjects:[Subject]; 3 roleRef:RoleRef",
    "MutatingWebhookConfiguration": "1 metadata:ObjectMeta; 2 webhooks:[MutatingWebhook]",
    "MutatingWebhook": (
        "1 name:str; 2 clientConfig:WebhookClientConfig; 3 rules:[RuleWithOperations]; 4 failurePolicy:str?; "
        "9 matchPolicy:str?; 5 namespaceSelector:LabelSelector; 11 objectSelector:LabelSelector; 6 sideEffects:str?; "
        "7 timeoutSeconds:int?; 8 admissionReviewVersions:[str]; 10 reinvocationPolicy:str?; "
        "12 matchConditions:[MatchCondition]"),
    "WebhookClientConfig": "3 url:str?; 1 service:ServiceReference; 2 caBundle:bytes",
    "ServiceReference": "1 namespace:str; 2 name:str; 3 path:str?; 4 port:int?",
    "RuleWithOperations": "1 operations:[str]; 2 rule:Rule*",
    "Rule": "1 apiGroups:[str]; 2 apiVersions:[str]; 3 resources:[str]; 4 scope:str?",
    "MatchCondition": "1 name:str; 2 expression:str",
    "ValidatingWebhookConfiguration": "1 metadata:ObjectMeta; 2 webhooks:[ValidatingWebhook]",
    "ValidatingWebhook": (
        "1 name:str; 2 clientConfig:WebhookClientConfig; 3 rules:[RuleWithOperations]; 4 failurePolicy:str?; "
        "9 matchPolicy:str?; 5 namespaceSelector:LabelSelector; 10 objectSelector:LabelSelector; 6 sideEffects:str?; "
        "7 timeoutSeconds:int?; 8 admissionReviewVersions:[str]; 11 matchConditions:[MatchCondition]"),
    "SelfSubjectAccessReview": (
        "1 metadata:ObjectMeta; 2 spec:SelfSubjectAccessReviewSpec; 3 status:SubjectAccessReviewStatus"),
    "SelfSubjectAccessReviewSpec": (
        "1 resourceAttributes:ResourceAttributes; 2 nonResourceAttributes:NonResourceAttributes"),
    "ResourceAttributes": (
        "1 namespace:str; 2 verb:str; 3 group:str; 4 version:str; 5 resource:str; 6 subresource:str; 7 name:str; "
        "8 fieldSelector:FieldSelectorAttributes; 9 labelSelector:LabelSelectorAttributes"),
    "FieldSelectorAttributes": "1 rawSelector:str; 2 requirements:[FieldSelectorRequirement]",
    "FieldSelectorRequirement": "1 key:str; 2 operator:str; 3 values:[str]",
    "LabelSelectorAttributes": "1 rawSelector:str; 2 requirements:[LabelSelectorRequirement]",
    "NonResourceAttributes": "1 path:str; 2 verb:str",
    "SubjectAccessReviewStatus": "1 allowed:bool; 4 denied:bool; 2 reason:str; 3 evaluationError:str",
    "SelfSubjectRulesReview": (
        "1 metadata:ObjectMeta; 2 spec:SelfSubjectRulesReviewSpec; 3 status:SubjectRulesReviewStatus"),
    "SelfSubjectRulesReviewSpec": "1 namespace:str",
    # kubectl create quota
    "ResourceQuota": "1 metadata:ObjectMeta; 2 spec:ResourceQuotaSpec; 3 status:ResourceQuotaStatus",
    "ResourceQuotaSpec": "1 hard:{quantity}; 2 scopes:[str]; 3 scopeSelector:ScopeSelector",
    "ScopeSelector": "1 matchExpressions:[ScopedResourceSelectorRequirement]",
    "ScopedResourceSelectorRequirement": "1 scopeName:str; 2 operator:str; 3 values:[str]",
    "ResourceQuotaStatus": "1 hard:{quantity}; 2 used:{quantity}",
    # kubectl create priorityclass
    "PriorityClass": ("1 metadata:ObjectMeta; 2 value:int?; 3 globalDefault:bool; 4 description:str; "
                      "5 preemptionPolicy:str?"),
    # kubectl auth whoami (authentication.k8s.io v1, v1beta1, v1alpha1: the same fields)
    "SelfSubjectReview": "1 metadata:ObjectMeta; 2 status:SelfSubjectReviewStatus",
    "SelfSubjectReviewStatus": "1 userInfo:UserInfo",
    "UserInfo": "1 username:str; 2 uid:str; 3 groups:[str]; 4 extra:{extra}",
    "SubjectRulesReviewStatus": (
        "1 resourceRules:[ResourceRule]; 2 nonResourceRules:[NonResourceRule]; 3 incomplete:bool; "
        "4 evaluationError:str"),
    "ResourceRule": "1 verbs:[str]; 2 apiGroups:[str]; 3 resources:[str]; 4 resourceNames:[str]",
    "NonResourceRule": "1 verbs:[str]; 2 nonResourceURLs:[str]",
    "SubjectAccessReview": "1 metadata:ObjectMeta; 2 spec:SubjectAccessReviewSpec; 3 status:SubjectAccessReviewStatus",
    "SubjectAccessReviewSpec": (
        "1 resourceAttributes:ResourceAttributes; 2 nonResourceAttributes:NonResourceAttributes; 3 user:str; "
        "4 groups:[str]; 5 extra:{extra}; 6 uid:str"),
    "DeleteOptions": (
        "1 gracePeriodSeconds:int?; 2 preconditions:Preconditions; 3 orphanDependents:bool?; "
        "4 propagationPolicy:str?; 5 dryRun:[str]"),
    "Preconditions": "1 uid:str?; 2 resourceVersion:str?",
    # kubectl drain (policy/v1 Eviction through the typed client), kubectl create poddisruptionbudget
    "Eviction": "1 metadata:ObjectMeta; 2 deleteOptions:DeleteOptions",
    "PodDisruptionBudget": "1 metadata:ObjectMeta; 2 spec:PodDisruptionBudgetSpec",
    "PodDisruptionBudgetSpec": ("1 minAvailable:intorstr; 2 selector:LabelSelector; 3 maxUnavailable:intorstr; "
                                "4 unhealthyPodEvictionPolicy:str?"),
    # kubectl create service clusterip|nodeport|loadbalancer|externalname
    "Service": "1 metadata:ObjectMeta; 2 spec:ServiceSpec; 3 status:ServiceStatus",
    "ServiceSpec": (
        "1 ports:[ServicePort]; 2 selector:{str}; 3 clusterIP:str; 18 clusterIPs:[str]; 4 type:str; "
        "5 externalIPs:[str]; 7 sessionAffinity:str; 8 loadBalancerIP:str; 9 loadBalancerSourceRanges:[str]; "
        "10 externalName:str; 11 externalTrafficPolicy:str; 12 healthCheckNodePort:int; "
        "13 publishNotReadyAddresses:bool; 14 sessionAffinityConfig:SessionAffinityConfig; 19 ipFamilies:[str]; "
        "17 ipFamilyPolicy:str?; 20 allocateLoadBalancerNodePorts:bool?; 21 loadBalancerClass:str?; "
        "22 internalTrafficPolicy:str?; 23 trafficDistribution:str?"),
    "ServicePort": "1 name:str; 2 protocol:str; 6 appProtocol:str?; 3 port:int; 4 targetPort:intorstr; 5 nodePort:int",
    "SessionAffinityConfig": "1 clientIP:ClientIPConfig",
    "ClientIPConfig": "1 timeoutSeconds:int?",
    "ServiceStatus": "1 loadBalancer:LoadBalancerStatus; 2 conditions:[Condition]",
    "LoadBalancerStatus": "1 ingress:[LoadBalancerIngress]",
    "LoadBalancerIngress": "1 ip:str; 2 hostname:str; 3 ipMode:str?; 4 ports:[PortStatus]",
    "PortStatus": "1 port:int; 2 protocol:str; 3 error:str?",
    "Condition": (
        "1 type:str; 2 status:str; 3 observedGeneration:int; 4 lastTransitionTime:time; 5 reason:str; 6 message:str"),
    # kubectl create job | cronjob (batch/v1)
    "Job": "1 metadata:ObjectMeta; 2 spec:JobSpec; 3 status:JobStatus",
    "JobSpec": (
        "1 parallelism:int?; 2 completions:int?; 3 activeDeadlineSeconds:int?; 11 podFailurePolicy:PodFailurePolicy; "
        "16 successPolicy:SuccessPolicy; 7 backoffLimit:int?; 12 backoffLimitPerIndex:int?; 13 maxFailedIndexes:int?; "
        "4 selector:LabelSelector; 5 manualSelector:bool?; 6 template:PodTemplateSpec; "
        "8 ttlSecondsAfterFinished:int?; 9 completionMode:str?; 10 suspend:bool?; 14 podReplacementPolicy:str?; "
        "15 managedBy:str?"),
    "JobStatus": (
        "1 conditions:[JobCondition]; 2 startTime:time; 3 completionTime:time; 4 active:int; 5 succeeded:int; "
        "6 failed:int; 11 terminating:int?; 7 completedIndexes:str; 10 failedIndexes:str?; "
        "8 uncountedTerminatedPods:UncountedTerminatedPods; 9 ready:int?"),
    "JobCondition": (
        "1 type:str; 2 status:str; 3 lastProbeTime:time; 4 lastTransitionTime:time; 5 reason:str; 6 message:str"),
    "UncountedTerminatedPods": "1 succeeded:[str]; 2 failed:[str]",
    "PodFailurePolicy": "1 rules:[PodFailurePolicyRule]",
    "PodFailurePolicyRule": (
        "1 action:str; 2 onExitCodes:PodFailurePolicyOnExitCodesRequirement; "
        "3 onPodConditions:[PodFailurePolicyOnPodConditionsPattern]"),
    "PodFailurePolicyOnExitCodesRequirement": "1 containerName:str?; 2 operator:str; 3 values:[int]",
    "PodFailurePolicyOnPodConditionsPattern": "1 type:str; 2 status:str",
    "SuccessPolicy": "1 rules:[SuccessPolicyRule]",
    "SuccessPolicyRule": "1 succeededIndexes:str?; 2 succeededCount:int?",
    "CronJob": "1 metadata:ObjectMeta; 2 spec:CronJobSpec; 3 status:CronJobStatus",
    "CronJobSpec": (
        "1 schedule:str; 8 timeZone:str?; 2 startingDeadlineSeconds:int?; 3 concurrencyPolicy:str; 4 suspend:bool?; "
        "5 jobTemplate:JobTemplateSpec; 6 successfulJobsHistoryLimit:int?; 7 failedJobsHistoryLimit:int?"),
    "JobTemplateSpec": "1 metadata:ObjectMeta; 2 spec:JobSpec",
    "CronJobStatus": "1 active:[ObjectReference]; 4 lastScheduleTime:time; 5 lastSuccessfulTime:time",
    # kubectl autoscale (1.33: autoscaling/v2 first)
    "HorizontalPodAutoscaler": (
        "1 metadata:ObjectMeta; 2 spec:HorizontalPodAutoscalerSpec; 3 status:HorizontalPodAutoscalerStatus"),
    "HorizontalPodAutoscalerSpec": (
        "1 scaleTargetRef:CrossVersionObjectReference; 2 minReplicas:int?; 3 maxReplicas:int; 4 metrics:[MetricSpec]; "
        "5 behavior:HorizontalPodAutoscalerBehavior"),
    "CrossVersionObjectReference": "1 kind:str; 2 name:str; 3 apiVersion:str",
    "MetricSpec": "1 type:str; 4 resource:ResourceMetricSource; 7 containerResource:ContainerResourceMetricSource",
    "ResourceMetricSource": "1 name:str; 2 target:MetricTarget",
    "ContainerResourceMetricSource": "1 name:str; 2 target:MetricTarget; 3 container:str",
    "MetricTarget": "1 type:str; 2 value:quantity; 3 averageValue:quantity; 4 averageUtilization:int?",
    "HorizontalPodAutoscalerBehavior": "1 scaleUp:HPAScalingRules; 2 scaleDown:HPAScalingRules",
    "HPAScalingRules": "3 stabilizationWindowSeconds:int?; 1 selectPolicy:str?; 2 policies:[HPAScalingPolicy]",
    "HPAScalingPolicy": "1 type:str; 2 value:int; 3 periodSeconds:int",
    "HorizontalPodAutoscalerStatus": "1 observedGeneration:int?; 3 currentReplicas:int; 4 desiredReplicas:int",
    # kubectl create configmap | secret generic|tls|docker-registry
    "ConfigMap": "1 metadata:ObjectMeta; 4 immutable:bool?; 2 data:{str}; 3 binaryData:{bytes}",
    "Secret": "1 metadata:ObjectMeta; 5 immutable:bool?; 2 data:{bytes}; 4 stringData:{str}; 3 type:str",
    # kubectl create ingress (networking.k8s.io/v1)
    "Ingress": "1 metadata:ObjectMeta; 2 spec:IngressSpec; 3 status:IngressStatus",
    "IngressSpec": ("4 ingressClassName:str?; 1 defaultBackend:IngressBackend; 2 tls:[IngressTLS]; "
                    "3 rules:[IngressRule]"),
    "IngressBackend": "4 service:IngressServiceBackend; 3 resource:TypedLocalObjectReference",
    "IngressServiceBackend": "1 name:str; 2 port:ServiceBackendPort",
    "ServiceBackendPort": "1 name:str; 2 number:int",
    "IngressTLS": "1 hosts:[str]; 2 secretName:str",
    "IngressRule": "1 host:str; 2 ingressRuleValue:IngressRuleValue*",
    "IngressRuleValue": "1 http:HTTPIngressRuleValue",
    "HTTPIngressRuleValue": "1 paths:[HTTPIngressPath]",
    "HTTPIngressPath": "1 path:str; 3 pathType:str?; 2 backend:IngressBackend",
    "IngressStatus": "1 loadBalancer:IngressLoadBalancerStatus",
    "IngressLoadBalancerStatus": "1 ingress:[IngressLoadBalancerIngress]",
    "IngressLoadBalancerIngress": "1 ip:str; 2 hostname:str; 4 ports:[IngressPortStatus]",
    "IngressPortStatus": "1 port:int; 2 protocol:str; 3 error:str?",
    "IngressClass": "1 metadata:ObjectMeta; 2 spec:IngressClassSpec",
    "IngressClassSpec": "1 controller:str; 2 parameters:IngressClassParametersReference",
    "IngressClassParametersReference": "1 apiGroup:str?; 2 kind:str; 3 name:str; 4 scope:str?; 5 namespace:str?",
}

# (apiVersion, kind) of the envelope → the message of `raw`; the kinds we serve, and DeleteOptions.
KINDS: dict[tuple[str, str], str] = {
    **{("v1", k): k for k in ("Namespace", "Node", "Pod", "Event", "ServiceAccount", "Service", "ConfigMap",
                              "Secret")},
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    **{(f"authentication.k8s.io/{v}", "SelfSubjectReview"): "SelfSubjectReview" for v in ("v1", "v1beta1", "v1alpha1")},
    **{("apps/v1", k): k for k in ("Deployment", "ReplicaSet")},
    **{("batch/v1", k): k for k in ("Job", "CronJob")},
    ("coordination.k8s.io/v1", "Lease"): "Lease",
    **{(v, "Eviction"): "Eviction" for v in ("policy/v1", "policy/v1beta1")},
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "HorizontalPodAutoscaler",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    **{("networking.k8s.io/v1", k): k for k in ("Ingress", "IngressClass")},
    **{("rbac.authorization.k8s.io/v1", k): k for k in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")},
    **{("admissionregistration.k8s.io/v1", k): k
       for k in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")},
    **{("authorization.k8s.io/v1", k): k for k in ("SelfSubjectAccessReview", "SelfSubjectRulesReview",
                                                         "SubjectAccessReview")},
    **{(v, "DeleteOptions"): "DeleteOptions" for v in ("v1", "meta.k8s.io/v1")},
}

_SCALARS = frozenset({"str", "bool", "int", "bytes", "time", "microtime", "quantity", "intorstr", "fieldsv1",
                      "extra"})
_LENGTH_DELIMITED = frozenset({"str", "bytes", "time", "microtime", "quantity", "intorstr", "fieldsv1", "extra"})


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # a scalar of _SCALARS or a message of SCHEMA
    repeated: bool = False
    map: bool = False
    inline: bool = False
    pointer: bool = False  # keep a zero value


def _parse(spec: str) -> dict[int, Field]:
    fields: dict[int, Field] = {}
    for item in spec.split(";"):
        number, _, rest = item.strip().partition(" ")
        name, _, kind = rest.partition(":")
        if kind.startswith("["):
            fields[int(number)] = Field(name, kind[1:-1], repeated=True)
        elif kind.startswith("{"):
            fields[int(number)] = Field(name, kind[1:-1], map=True)
        elif kind.endswith("*"):
            fields[int(number)] = Field(name, kind[:-1], inline=True)
        elif kind.endswith("?"):
            fields[int(number)] = Field(name, kind[:-1], pointer=True)
        else:
            fields[int(number)] = Field(name, kind)
    return fields


@cache
def message(name: str) -> dict[int, Field]:
    """The fields of one message of SCHEMA, by number."""
    return _parse(SCHEMA[name])


# ----------------------------------------------------------------------------- wire primitives


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & ((1 << 64) - 1), i
        shift += 7


def wire_fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """A message's (field number, wire type, value) triples in order: varints and fixed-width values as
    unsigned ints, length-delimited values as bytes. Malformed input raises ValueError."""
    out: list[tuple[int, int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, i = _varint(data, i)
        elif wire == _LEN:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise ValueError(f"field {number}: length {size} runs past the end")
            value, i = data[i:i + size], i + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if i + width > len(data):
                raise ValueError(f"field {number}: truncated fixed-width value")
            value, i = int.from_bytes(data[i:i + width], "little"), i + width
        else:
            raise ValueError(f"field {number}: unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# ----------------------------------------------------------------------------- values


def _timestamp(data: bytes, micro: bool, where: str) -> str | None:
    if not data:
        return None  # a zero Time: JSON null, left out
    seconds = nanos = 0
    for number, wire, value in wire_fields(data):
        if wire == _VARINT and number == 1:
            seconds = _signed(int(value))
        elif wire == _VARINT and number == 2:
            nanos = _signed(int(value))
    try:
        moment = _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise ValueError(f"{where}: time out of range ({seconds}s)") from None
    return format_rfc3339_micro(moment) if micro else format_rfc3339(moment)


def _int_or_string(data: bytes, where: str) -> int | str:
    kind, number_value, text = 0, 0, ""
    for number, wire, value in wire_fields(data):
        if number == 1 and wire == _VARINT:
            kind = _signed(int(value))
        elif number == 2 and wire == _VARINT:
            number_value = _signed(int(value))
        elif number == 3 and isinstance(value, bytes):
            text = value.decode("utf-8")
    if kind not in (0, 1):
        raise ValueError(f"{where}: IntOrString type must be 0 (int) or 1 (string), got {kind}")
    return number_value if kind == 0 else text


def _scalar(kind: str, wire: int, value: int | bytes, where: str) -> Any:
    expected = _LEN if kind in _LENGTH_DELIMITED else _VARINT
    if wire != expected:
        raise ValueError(f"{where}: wire type {wire} does not carry a {kind}")
    if kind == "int":
        assert isinstance(value, int)
        return _signed(value)
    if kind == "bool":
        return bool(value)
    assert isinstance(value, bytes)
    if kind == "str":
        return value.decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(value).decode("ascii")
    if kind in ("time", "microtime"):
        return _timestamp(value, kind == "microtime", where)
    if kind == "quantity":
        return next((v.decode("utf-8") for n, _, v in wire_fields(value) if n == 1 and isinstance(v, bytes)), "")
    if kind == "intorstr":
        return _int_or_string(value, where)
    if kind == "extra":
        return [v.decode("utf-8") for n, _, v in wire_fields(value) if n == 1 and isinstance(v, bytes)]
    # fieldsv1: the managed-fields set, JSON text in FieldsV1.Raw
    raw = next((v for n, _, v in wire_fields(value) if n == 1 and isinstance(v, bytes)), b"")
    return json.loads(raw) if raw else None


def _value(field: Field, wire: int, value: int | bytes, where: str) -> Any:
    if field.type in _SCALARS:
        return _scalar(field.type, wire, value, where)
    if wire != _LEN:
        raise ValueError(f"{where}: wire type {wire} does not carry a {field.type}")
    assert isinstance(value, bytes)
    return decode_message(field.type, value, where)


def _repeated(field: Field, wire: int, value: int | bytes, where: str) -> list[Any]:
    """One occurrence of a repeated field; numbers may come packed (several varints in one LEN)."""
    if field.type in ("int", "bool") and wire == _LEN:
        assert isinstance(value, bytes)
        out, i = [], 0
        while i < len(value):
            item, i = _varint(value, i)
            out.append(_scalar(field.type, _VARINT, item, where))
        return out
    return [_value(field, wire, value, where)]


def _map_entry(field: Field, wire: int, value: int | bytes, where: str) -> tuple[str, Any]:
    if wire != _LEN:
        raise ValueError(f"{where}: wire type {wire} does not carry a map entry")
    assert isinstance(value, bytes)
    key, item = "", None
    for number, entry_wire, entry_value in wire_fields(value):
        if number == 1:
            key = _scalar("str", entry_wire, entry_value, where)
        elif number == 2:
            item = _value(field, entry_wire, entry_value, f"{where}[{key}]")
    if item is None:  # an entry without a value holds the type's zero
        item = "" if field.type in ("str", "quantity") else {} if field.type not in _SCALARS else None
    return key, item


def _is_zero(value: Any) -> bool:
    return value is None or value == "" or value is False or (isinstance(value, int) and value == 0)


def decode_message(name: str, data: bytes, where: str = "") -> dict[str, Any]:
    """The JSON form of one message of SCHEMA."""
    fields = message(name)
    out: dict[str, Any] = {}
    for number, wire, value in wire_fields(data):
        field = fields.get(number)
        if field is None:
            continue  # unknown to us: skipped, as upstream's decoder skips unknown fields
        path = f"{where}.{field.name}" if where else field.name
        if field.inline:
            if wire != _LEN or not isinstance(value, bytes):
                raise ValueError(f"{path}: wire type {wire} does not carry a {field.type}")
            out.update(decode_message(field.type, value, where))
        elif field.map:
            key, item = _map_entry(field, wire, value, path)
            out.setdefault(field.name, {})[key] = item
        elif field.repeated:
            out.setdefault(field.name, []).extend(_repeated(field, wire, value, path))
        else:
            decoded = _value(field, wire, value, path)
            if (field.pointer and decoded is not None) or not _is_zero(decoded):
                out[field.name] = decoded
            else:
                out.pop(field.name, None)  # the last occurrence wins, as protobuf merges scalars
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A whole request body: envelope, then the typed object with its apiVersion and kind.
    ValueError (UnicodeDecodeError included) says what is malformed."""
    if not body.startswith(MAGIC):
        raise ValueError('not Kubernetes protobuf: the body does not start with "k8s\\x00"')
    api_version = kind = encoding = ""
    raw = b""
    for number, wire, value in wire_fields(body[len(MAGIC):]):
        if number == 1 and isinstance(value, bytes):
            for n, _, v in wire_fields(value):
                if n == 1 and isinstance(v, bytes):
                    api_version = v.decode("utf-8")
                elif n == 2 and isinstance(v, bytes):
                    kind = v.decode("utf-8")
        elif number == 2 and isinstance(value, bytes):
            raw = value
        elif number == 3 and isinstance(value, bytes):
            encoding = value.decode("utf-8")
        elif wire != _LEN and number in (1, 2, 3, 4):
            raise ValueError(f"envelope field {number}: wire type {wire} is not length-delimited")
    if encoding:
        raise ValueError(f'content encoding "{encoding}" is not supported')
    if not kind:
        raise ValueError("the envelope names no kind")
    name = KINDS.get((api_version, kind))
    if name is None:
        raise ValueError(f'no protobuf decoding for kind "{kind}" in version "{api_version}"')
    return {"apiVersion": api_version, "kind": kind, **decode_message(name, raw)}
