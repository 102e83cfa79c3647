"""core/v1: Namespace, Node, Pod, Event, Binding, ServiceAccount, Service, Endpoints, ConfigMap, Secret,
PersistentVolume, PersistentVolumeClaim and the types they are built of.

Field names, wire names, required fields and strategic-merge keys follow upstream's
k8s.io/api/core/v1/types.go. Enum-like fields (restartPolicy, dnsPolicy, protocol, ...) are
plain strings: as upstream, a wrong value is a validation error (422), not a decoding error.
A few rarely used corners (seLinuxOptions, the volume plugins minik8s does not mount, ...) are
kept as loose dicts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from machinery.api.base import ApiModel, merge_key, patch_strategy
from machinery.api.meta import LabelSelector, ObjectMeta, Time

# resource.Quantity: "64Mi", "250m", or a bare number (`cpu: 1`), kept as written.
Quantity = Annotated[
    str | int | float,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True}),
]
# intstr.IntOrString: a port number or a port name, "25%" or 1.
IntOrString = Annotated[
    int | str,
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True}),
]
# metav1.MicroTime: RFC 3339 with microseconds ("2026-11-21T23:47:31.123456Z").
MicroTime = str
ResourceList = dict[str, Quantity]


# --- references --------------------------------------------------------------------------------

class ObjectReference(ApiModel):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    api_version: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class LocalObjectReference(ApiModel):
    name: str | None = None


# --- Namespace ---------------------------------------------------------------------------------

class NamespaceSpec(ApiModel):
    finalizers: list[str] | None = None


class NamespaceCondition(ApiModel):
    type: str
    status: str
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class NamespaceStatus(ApiModel):
    phase: str | None = None  # Active | Terminating
    conditions: list[NamespaceCondition] | None = Field(None, json_schema_extra=merge_key("type"))


class Namespace(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NamespaceSpec | None = None
    status: NamespaceStatus | None = None


# --- Node --------------------------------------------------------------------------------------

class Taint(ApiModel):
    key: str
    value: str | None = None
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute
    time_added: Time | None = None


class NodeSpec(ApiModel):
    pod_cidr: str | None = Field(None, alias="podCIDR")
    pod_cidrs: list[str] | None = Field(None, alias="podCIDRs", json_schema_extra=patch_strategy("merge"))
    provider_id: str | None = Field(None, alias="providerID")
    unschedulable: bool | None = None
    taints: list[Taint] | None = None
    config_source: dict[str, Any] | None = None  # deprecated upstream
    external_id: str | None = Field(None, alias="externalID")  # deprecated upstream


class NodeCondition(ApiModel):
    type: str  # Ready | MemoryPressure | DiskPressure | PIDPressure | NetworkUnavailable
    status: str  # True | False | Unknown
    last_heartbeat_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class NodeAddress(ApiModel):
    type: str  # Hostname | InternalIP | ExternalIP | InternalDNS | ExternalDNS
    address: str


class DaemonEndpoint(ApiModel):
    port: int = Field(alias="Port")  # upstream spells it with a capital P


class NodeDaemonEndpoints(ApiModel):
    kubelet_endpoint: DaemonEndpoint | None = None


class NodeSystemInfo(ApiModel):
    machine_id: str = Field(alias="machineID")
    system_uuid: str = Field(alias="systemUUID")
    boot_id: str = Field(alias="bootID")
    kernel_version: str
    os_image: str
    container_runtime_version: str
    kubelet_version: str
    kube_proxy_version: str
    operating_system: str
    architecture: str
    swap: dict[str, Any] | None = None


class ContainerImage(ApiModel):
    names: list[str] | None = None
    size_bytes: int | None = None


class AttachedVolume(ApiModel):
    name: str
    device_path: str


class NodeStatus(ApiModel):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    phase: str | None = None  # deprecated upstream
    conditions: list[NodeCondition] | None = Field(None, json_schema_extra=merge_key("type"))
    addresses: list[NodeAddress] | None = Field(None, json_schema_extra=merge_key("type"))
    daemon_endpoints: NodeDaemonEndpoints | None = None
    node_info: NodeSystemInfo | None = None
    images: list[ContainerImage] | None = None
    volumes_in_use: list[str] | None = None
    volumes_attached: list[AttachedVolume] | None = None
    config: dict[str, Any] | None = None
    runtime_handlers: list[dict[str, Any]] | None = None
    features: dict[str, Any] | None = None


class Node(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


# --- Container ---------------------------------------------------------------------------------

class ContainerPort(ApiModel):
    name: str | None = None
    host_port: int | None = None
    container_port: int
    protocol: str | None = None  # TCP | UDP | SCTP
    host_ip: str | None = Field(None, alias="hostIP")


class ObjectFieldSelector(ApiModel):
    api_version: str | None = None
    field_path: str


class ResourceFieldSelector(ApiModel):
    container_name: str | None = None
    resource: str
    divisor: Quantity | None = None


class ConfigMapKeySelector(ApiModel):
    name: str | None = None
    key: str
    optional: bool | None = None


class SecretKeySelector(ApiModel):
    name: str | None = None
    key: str
    optional: bool | None = None


class EnvVarSource(ApiModel):
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: ConfigMapKeySelector | None = None
    secret_key_ref: SecretKeySelector | None = None


class EnvVar(ApiModel):
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class ConfigMapEnvSource(ApiModel):
    name: str | None = None
    optional: bool | None = None


class SecretEnvSource(ApiModel):
    name: str | None = None
    optional: bool | None = None


class EnvFromSource(ApiModel):
    prefix: str | None = None
    config_map_ref: ConfigMapEnvSource | None = None
    secret_ref: SecretEnvSource | None = None


class ResourceClaim(ApiModel):
    name: str
    request: str | None = None


class ResourceRequirements(ApiModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None
    claims: list[ResourceClaim] | None = None


class ContainerResizePolicy(ApiModel):
    resource_name: str
    restart_policy: str


class VolumeMount(ApiModel):
    name: str
    read_only: bool | None = None
    recursive_read_only: str | None = None
    mount_path: str
    sub_path: str | None = None
    mount_propagation: str | None = None
    sub_path_expr: str | None = None


class VolumeDevice(ApiModel):
    name: str
    device_path: str


class ExecAction(ApiModel):
    command: list[str] | None = None


class HTTPHeader(ApiModel):
    name: str
    value: str


class HTTPGetAction(ApiModel):
    path: str | None = None
    port: IntOrString
    host: str | None = None
    scheme: str | None = None  # HTTP | HTTPS
    http_headers: list[HTTPHeader] | None = None


class TCPSocketAction(ApiModel):
    port: IntOrString
    host: str | None = None


class GRPCAction(ApiModel):
    port: int
    service: str | None = None


class SleepAction(ApiModel):
    seconds: int


class Probe(ApiModel):
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    grpc: GRPCAction | None = None
    initial_delay_seconds: int | None = None
    timeout_seconds: int | None = None
    period_seconds: int | None = None
    success_threshold: int | None = None
    failure_threshold: int | None = None
    termination_grace_period_seconds: int | None = None


class LifecycleHandler(ApiModel):
    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    sleep: SleepAction | None = None


class Lifecycle(ApiModel):
    post_start: LifecycleHandler | None = None
    pre_stop: LifecycleHandler | None = None
    stop_signal: str | None = None


class Capabilities(ApiModel):
    add: list[str] | None = None
    drop: list[str] | None = None


class SecurityContext(ApiModel):
    capabilities: Capabilities | None = None
    privileged: bool | None = None
    se_linux_options: dict[str, Any] | None = None
    windows_options: dict[str, Any] | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    read_only_root_filesystem: bool | None = None
    allow_privilege_escalation: bool | None = None
    proc_mount: str | None = None
    seccomp_profile: dict[str, Any] | None = None
    app_armor_profile: dict[str, Any] | None = None


class Container(ApiModel):
    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    ports: list[ContainerPort] | None = Field(None, json_schema_extra=merge_key("containerPort"))
    env_from: list[EnvFromSource] | None = None
    env: list[EnvVar] | None = Field(None, json_schema_extra=merge_key("name"))
    resources: ResourceRequirements | None = None
    resize_policy: list[ContainerResizePolicy] | None = None
    restart_policy: str | None = None  # only "Always", on init containers (sidecars)
    restart_policy_rules: list[dict[str, Any]] | None = None
    volume_mounts: list[VolumeMount] | None = Field(None, json_schema_extra=merge_key("mountPath"))
    volume_devices: list[VolumeDevice] | None = Field(None, json_schema_extra=merge_key("devicePath"))
    liveness_probe: Probe | None = None
    readiness_probe: Probe | None = None
    startup_probe: Probe | None = None
    lifecycle: Lifecycle | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None  # File | FallbackToLogsOnError
    image_pull_policy: str | None = None  # Always | IfNotPresent | Never
    security_context: SecurityContext | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None


class EphemeralContainer(Container):
    target_container_name: str | None = None


# --- Volumes -----------------------------------------------------------------------------------

class EmptyDirVolumeSource(ApiModel):
    medium: str | None = None  # "" | Memory
    size_limit: Quantity | None = None


class HostPathVolumeSource(ApiModel):
    path: str
    type: str | None = None  # "" | DirectoryOrCreate | Directory | FileOrCreate | File | Socket | ...


class KeyToPath(ApiModel):
    key: str
    path: str
    mode: int | None = None


class ConfigMapVolumeSource(ApiModel):
    name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class SecretVolumeSource(ApiModel):
    secret_name: str | None = None
    items: list[KeyToPath] | None = None
    default_mode: int | None = None
    optional: bool | None = None


class PersistentVolumeClaimVolumeSource(ApiModel):
    claim_name: str
    read_only: bool | None = None


class DownwardAPIVolumeFile(ApiModel):
    path: str
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    mode: int | None = None


class DownwardAPIVolumeSource(ApiModel):
    items: list[DownwardAPIVolumeFile] | None = None
    default_mode: int | None = None


class DownwardAPIProjection(ApiModel):
    items: list[DownwardAPIVolumeFile] | None = None


class ConfigMapProjection(ApiModel):
    name: str | None = None
    items: list[KeyToPath] | None = None
    optional: bool | None = None


class SecretProjection(ApiModel):
    name: str | None = None
    items: list[KeyToPath] | None = None
    optional: bool | None = None


class ServiceAccountTokenProjection(ApiModel):
    audience: str | None = None
    expiration_seconds: int | None = None
    path: str


class VolumeProjection(ApiModel):
    secret: SecretProjection | None = None
    downward_api: DownwardAPIProjection | None = Field(None, alias="downwardAPI")
    config_map: ConfigMapProjection | None = None
    service_account_token: ServiceAccountTokenProjection | None = None
    # served by the API, not projected by minik8s's kubelet (a pod naming one fails to mount)
    cluster_trust_bundle: dict[str, Any] | None = None
    pod_certificate: dict[str, Any] | None = None


class ProjectedVolumeSource(ApiModel):
    sources: list[VolumeProjection] | None = None
    default_mode: int | None = None


class Volume(ApiModel):
    name: str
    empty_dir: EmptyDirVolumeSource | None = None
    host_path: HostPathVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    projected: ProjectedVolumeSource | None = None
    downward_api: DownwardAPIVolumeSource | None = Field(None, alias="downwardAPI")
    nfs: dict[str, Any] | None = None
    csi: dict[str, Any] | None = None
    ephemeral: dict[str, Any] | None = None
    image: dict[str, Any] | None = None


# --- Scheduling: affinity, tolerations, spread ---------------------------------------------------

class NodeSelectorRequirement(ApiModel):
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: list[str] | None = None


class NodeSelectorTerm(ApiModel):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(ApiModel):
    node_selector_terms: list[NodeSelectorTerm]


class PreferredSchedulingTerm(ApiModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(ApiModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class PodAffinityTerm(ApiModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(ApiModel):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(ApiModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class PodAntiAffinity(ApiModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(ApiModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


class Toleration(ApiModel):
    key: str | None = None
    operator: str | None = None  # Exists | Equal
    value: str | None = None
    effect: str | None = None  # NoSchedule | PreferNoSchedule | NoExecute
    toleration_seconds: int | None = None


class TopologySpreadConstraint(ApiModel):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


# --- PodSpec -----------------------------------------------------------------------------------

class Sysctl(ApiModel):
    name: str
    value: str


class PodSecurityContext(ApiModel):
    se_linux_options: dict[str, Any] | None = None
    windows_options: dict[str, Any] | None = None
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    supplemental_groups: list[int] | None = None
    supplemental_groups_policy: str | None = None
    fs_group: int | None = None
    sysctls: list[Sysctl] | None = None
    fs_group_change_policy: str | None = None
    seccomp_profile: dict[str, Any] | None = None
    app_armor_profile: dict[str, Any] | None = None
    se_linux_change_policy: str | None = None


class HostAlias(ApiModel):
    ip: str
    hostnames: list[str] | None = None


class PodDNSConfigOption(ApiModel):
    name: str | None = None
    value: str | None = None


class PodDNSConfig(ApiModel):
    nameservers: list[str] | None = None
    searches: list[str] | None = None
    options: list[PodDNSConfigOption] | None = None


class PodReadinessGate(ApiModel):
    condition_type: str


class PodOS(ApiModel):
    name: str  # linux | windows


class PodSchedulingGate(ApiModel):
    name: str


class PodSpec(ApiModel):
    volumes: list[Volume] | None = Field(None, json_schema_extra=merge_key("name", "merge,retainKeys"))
    init_containers: list[Container] | None = Field(None, json_schema_extra=merge_key("name"))
    containers: list[Container] = Field(json_schema_extra=merge_key("name"))
    ephemeral_containers: list[EphemeralContainer] | None = Field(None, json_schema_extra=merge_key("name"))
    restart_policy: str | None = None  # Always | OnFailure | Never
    termination_grace_period_seconds: int | None = None
    active_deadline_seconds: int | None = None
    dns_policy: str | None = None  # ClusterFirst | ClusterFirstWithHostNet | Default | None
    node_selector: dict[str, str] | None = None
    service_account_name: str | None = None
    service_account: str | None = None  # deprecated alias of serviceAccountName
    automount_service_account_token: bool | None = None
    node_name: str | None = None
    host_network: bool | None = None
    host_pid: bool | None = Field(None, alias="hostPID")
    host_ipc: bool | None = Field(None, alias="hostIPC")
    share_process_namespace: bool | None = None
    security_context: PodSecurityContext | None = None
    image_pull_secrets: list[LocalObjectReference] | None = Field(None, json_schema_extra=merge_key("name"))
    hostname: str | None = None
    hostname_override: str | None = None
    subdomain: str | None = None
    affinity: Affinity | None = None
    scheduler_name: str | None = None
    tolerations: list[Toleration] | None = None
    host_aliases: list[HostAlias] | None = Field(None, json_schema_extra=merge_key("ip"))
    priority_class_name: str | None = None
    priority: int | None = None
    dns_config: PodDNSConfig | None = None
    readiness_gates: list[PodReadinessGate] | None = None
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    preemption_policy: str | None = None  # PreemptLowerPriority | Never
    overhead: ResourceList | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = Field(
        None, json_schema_extra=merge_key("topologyKey"))
    set_hostname_as_fqdn: bool | None = Field(None, alias="setHostnameAsFQDN")
    os: PodOS | None = None
    host_users: bool | None = None
    scheduling_gates: list[PodSchedulingGate] | None = Field(None, json_schema_extra=merge_key("name"))
    resource_claims: list[dict[str, Any]] | None = Field(
        None, json_schema_extra=merge_key("name", "merge,retainKeys"))
    resources: ResourceRequirements | None = None


class PodTemplateSpec(ApiModel):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


# --- PodStatus ---------------------------------------------------------------------------------

class PodCondition(ApiModel):
    type: str  # PodScheduled | Initialized | ContainersReady | Ready | PodReadyToStartContainers
    observed_generation: int | None = None
    status: str
    last_probe_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class PodIP(ApiModel):
    ip: str


class HostIP(ApiModel):
    ip: str


class ContainerStateWaiting(ApiModel):
    reason: str | None = None
    message: str | None = None


class ContainerStateRunning(ApiModel):
    started_at: Time | None = None


class ContainerStateTerminated(ApiModel):
    exit_code: int
    signal: int | None = None
    reason: str | None = None
    message: str | None = None
    started_at: Time | None = None
    finished_at: Time | None = None
    container_id: str | None = Field(None, alias="containerID")


class ContainerState(ApiModel):
    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class VolumeMountStatus(ApiModel):
    name: str
    mount_path: str
    read_only: bool | None = None
    recursive_read_only: str | None = None


class ContainerStatus(ApiModel):
    name: str
    state: ContainerState | None = None
    last_state: ContainerState | None = None
    ready: bool
    restart_count: int
    image: str
    image_id: str = Field(alias="imageID")
    container_id: str | None = Field(None, alias="containerID")
    started: bool | None = None
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None
    volume_mounts: list[VolumeMountStatus] | None = None
    user: dict[str, Any] | None = None
    allocated_resources_status: list[dict[str, Any]] | None = None
    stop_signal: str | None = None


class PodStatus(ApiModel):
    observed_generation: int | None = None
    phase: str | None = None  # Pending | Running | Succeeded | Failed | Unknown
    conditions: list[PodCondition] | None = Field(None, json_schema_extra=merge_key("type"))
    message: str | None = None
    reason: str | None = None
    nominated_node_name: str | None = None
    host_ip: str | None = Field(None, alias="hostIP")
    host_ips: list[HostIP] | None = Field(None, alias="hostIPs", json_schema_extra=merge_key("ip"))
    pod_ip: str | None = Field(None, alias="podIP")
    pod_ips: list[PodIP] | None = Field(None, alias="podIPs", json_schema_extra=merge_key("ip"))
    start_time: Time | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    container_statuses: list[ContainerStatus] | None = None
    qos_class: str | None = None  # Guaranteed | Burstable | BestEffort
    ephemeral_container_statuses: list[ContainerStatus] | None = None
    resize: str | None = None
    allocated_resources: ResourceList | None = None
    resources: ResourceRequirements | None = None
    resource_claim_statuses: list[dict[str, Any]] | None = Field(
        None, json_schema_extra=merge_key("name", "merge,retainKeys"))


class Pod(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec | None = None
    status: PodStatus | None = None


class Binding(ApiModel):
    """The pods/binding subresource: the scheduler's "put this pod on that node"."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Binding"] = "Binding"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    target: ObjectReference


# --- ServiceAccount ----------------------------------------------------------------------------

class ServiceAccount(ApiModel):
    """An identity for processes in pods; tokens for it come from serviceaccounts/{name}/token."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["ServiceAccount"] = "ServiceAccount"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    secrets: list[ObjectReference] | None = Field(None, json_schema_extra=merge_key("name"))
    image_pull_secrets: list[LocalObjectReference] | None = None
    automount_service_account_token: bool | None = None


# --- ConfigMap, Secret --------------------------------------------------------------------------

# []byte on the wire: a base64 string (standard alphabet, padded), decoded strictly by the apiserver
Base64Bytes = Annotated[str, WithJsonSchema({"type": "string", "format": "byte"})]


class ConfigMap(ApiModel):
    """Configuration data for pods: UTF-8 values in data, anything else base64 in binaryData."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["ConfigMap"] = "ConfigMap"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    immutable: bool | None = None
    data: dict[str, str] | None = None
    binary_data: dict[str, Base64Bytes] | None = None


class Secret(ApiModel):
    """Sensitive data: values base64 in data; stringData is a write-only convenience merged into data
    by the apiserver and never stored or returned."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Secret"] = "Secret"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    immutable: bool | None = None
    data: dict[str, Base64Bytes] | None = None
    string_data: dict[str, str] | None = None
    type: str | None = None


# --- PersistentVolume, PersistentVolumeClaim ----------------------------------------------------

class LocalVolumeSource(ApiModel):
    path: str
    fs_type: str | None = None


class VolumeNodeAffinity(ApiModel):
    required: NodeSelector | None = None


class PersistentVolumeSpec(ApiModel):
    capacity: ResourceList | None = None
    access_modes: list[str] | None = None  # ReadWriteOnce | ReadOnlyMany | ReadWriteMany | ReadWriteOncePod
    claim_ref: ObjectReference | None = None
    persistent_volume_reclaim_policy: str | None = None  # Retain | Delete | Recycle
    storage_class_name: str | None = None
    mount_options: list[str] | None = None
    volume_mode: str | None = None  # Filesystem | Block
    node_affinity: VolumeNodeAffinity | None = None
    volume_attributes_class_name: str | None = None
    # the volume sources minik8s serves; the rest are kept loose so a manifest naming one is refused
    # by validation with upstream's message rather than by the decoder
    host_path: HostPathVolumeSource | None = None
    local: LocalVolumeSource | None = None
    nfs: dict[str, Any] | None = None
    csi: dict[str, Any] | None = None


class PersistentVolumeStatus(ApiModel):
    phase: str | None = None  # Pending | Available | Bound | Released | Failed
    message: str | None = None
    reason: str | None = None
    last_phase_transition_time: Time | None = None


class PersistentVolume(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec | None = None
    status: PersistentVolumeStatus | None = None


class TypedLocalObjectReference(ApiModel):
    api_group: str | None = None
    kind: str
    name: str


class TypedObjectReference(TypedLocalObjectReference):
    namespace: str | None = None


class VolumeResourceRequirements(ApiModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None


class PersistentVolumeClaimSpec(ApiModel):
    access_modes: list[str] | None = None
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements | None = None
    volume_name: str | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    data_source: TypedLocalObjectReference | None = None
    data_source_ref: TypedObjectReference | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimCondition(ApiModel):
    type: str
    status: str
    last_probe_time: Time | None = None
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class PersistentVolumeClaimStatus(ApiModel):
    phase: str | None = None  # Pending | Bound | Lost
    access_modes: list[str] | None = None
    capacity: ResourceList | None = None
    conditions: list[PersistentVolumeClaimCondition] | None = Field(None, json_schema_extra=merge_key("type"))
    allocated_resources: ResourceList | None = None
    current_volume_attributes_class_name: str | None = None


class PersistentVolumeClaim(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec | None = None
    status: PersistentVolumeClaimStatus | None = None


# --- Event -------------------------------------------------------------------------------------

class EventSource(ApiModel):
    component: str | None = None
    host: str | None = None


class EventSeries(ApiModel):
    count: int | None = None
    last_observed_time: MicroTime | None = None


class Event(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Event"] = "Event"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    involved_object: ObjectReference
    reason: str | None = None
    message: str | None = None
    source: EventSource | None = None
    first_timestamp: Time | None = None
    last_timestamp: Time | None = None
    count: int | None = None
    type: str | None = None  # Normal | Warning
    event_time: MicroTime | None = None
    series: EventSeries | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


# --- Service -----------------------------------------------------------------------------------

class ServicePort(ApiModel):
    name: str | None = None
    protocol: str | None = None  # TCP | UDP | SCTP (defaulted TCP)
    app_protocol: str | None = None
    port: int
    target_port: IntOrString | None = None  # defaulted to port
    node_port: int | None = None


class ClientIPConfig(ApiModel):
    timeout_seconds: int | None = None


class SessionAffinityConfig(ApiModel):
    client_ip: ClientIPConfig | None = Field(None, alias="clientIP")


class ServiceSpec(ApiModel):
    ports: list[ServicePort] | None = Field(None, json_schema_extra=merge_key("port"))
    selector: dict[str, str] | None = None
    cluster_ip: str | None = Field(None, alias="clusterIP")
    cluster_ips: list[str] | None = Field(None, alias="clusterIPs")
    type: str | None = None  # ClusterIP | NodePort | LoadBalancer | ExternalName
    external_ips: list[str] | None = Field(None, alias="externalIPs")
    session_affinity: str | None = None  # None | ClientIP
    load_balancer_ip: str | None = Field(None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[str] | None = None
    external_name: str | None = None
    external_traffic_policy: str | None = None  # Cluster | Local
    health_check_node_port: int | None = None
    publish_not_ready_addresses: bool | None = None
    session_affinity_config: SessionAffinityConfig | None = None
    ip_families: list[str] | None = None
    ip_family_policy: str | None = None  # SingleStack | PreferDualStack | RequireDualStack
    allocate_load_balancer_node_ports: bool | None = None
    load_balancer_class: str | None = None
    internal_traffic_policy: str | None = None  # Cluster | Local
    traffic_distribution: str | None = None


class PortStatus(ApiModel):
    port: int
    protocol: str
    error: str | None = None


class LoadBalancerIngress(ApiModel):
    ip: str | None = None
    hostname: str | None = None
    ip_mode: str | None = None  # VIP | Proxy
    ports: list[PortStatus] | None = None


class LoadBalancerStatus(ApiModel):
    ingress: list[LoadBalancerIngress] | None = None


class ServiceStatus(ApiModel):
    load_balancer: LoadBalancerStatus | None = None
    conditions: list[dict[str, Any]] | None = Field(None, json_schema_extra=merge_key("type"))


class Service(ApiModel):
    """A stable virtual IP and DNS name in front of the pods its selector picks."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Service"] = "Service"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ServiceSpec | None = None
    status: ServiceStatus | None = None


# --- Endpoints (the pre-EndpointSlice view, kept for older clients) ------------------------------

class EndpointAddress(ApiModel):
    ip: str
    hostname: str | None = None
    node_name: str | None = None
    target_ref: ObjectReference | None = None


class EndpointPort(ApiModel):
    name: str | None = None
    port: int
    protocol: str | None = None
    app_protocol: str | None = None


class EndpointSubset(ApiModel):
    addresses: list[EndpointAddress] | None = None
    not_ready_addresses: list[EndpointAddress] | None = None
    ports: list[EndpointPort] | None = None


class Endpoints(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Endpoints"] = "Endpoints"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subsets: list[EndpointSubset] | None = None


# --- ResourceQuota and LimitRange (a namespace's budget and its per-object bounds) --------------

class ScopedResourceSelectorRequirement(ApiModel):
    scope_name: str  # Terminating | NotTerminating | BestEffort | NotBestEffort | PriorityClass | ...
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: list[str] | None = None


class ScopeSelector(ApiModel):
    match_expressions: list[ScopedResourceSelectorRequirement] | None = None


class ResourceQuotaSpec(ApiModel):
    hard: ResourceList | None = None
    scopes: list[str] | None = None
    scope_selector: ScopeSelector | None = None


class ResourceQuotaStatus(ApiModel):
    hard: ResourceList | None = None
    used: ResourceList | None = None


class ResourceQuota(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["ResourceQuota"] = "ResourceQuota"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceQuotaSpec | None = None
    status: ResourceQuotaStatus | None = None


class LimitRangeItem(ApiModel):
    type: str  # Container | Pod | PersistentVolumeClaim
    max: ResourceList | None = None
    min: ResourceList | None = None
    default: ResourceList | None = None
    default_request: ResourceList | None = None
    max_limit_request_ratio: ResourceList | None = None


class LimitRangeSpec(ApiModel):
    limits: list[LimitRangeItem]


class LimitRange(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["LimitRange"] = "LimitRange"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LimitRangeSpec | None = None


# --- ReplicationController (the ReplicaSet before label-selector expressions) -------------------

class ReplicationControllerSpec(ApiModel):
    replicas: int | None = None
    min_ready_seconds: int | None = None
    selector: dict[str, str] | None = None
    template: PodTemplateSpec | None = None


class ReplicationControllerCondition(ApiModel):
    type: str  # ReplicaFailure
    status: str
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class ReplicationControllerStatus(ApiModel):
    replicas: int
    fully_labeled_replicas: int | None = None
    ready_replicas: int | None = None
    available_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[ReplicationControllerCondition] | None = Field(None, json_schema_extra=merge_key("type"))


class ReplicationController(ApiModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["ReplicationController"] = "ReplicationController"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec | None = None
    status: ReplicationControllerStatus | None = None
