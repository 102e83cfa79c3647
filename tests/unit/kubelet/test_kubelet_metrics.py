"""The kubelet's metric names for CRI operations (upstream instrumented_services.go)."""

from __future__ import annotations

import pytest

from kubelet.metrics import operation_type
from machinery.cri import api_pb2 as pb


@pytest.mark.parametrize(("request_type", "expected"), [
    (pb.RunPodSandboxRequest, "run_podsandbox"), (pb.PodSandboxStatusRequest, "podsandbox_status"),
    (pb.ListPodSandboxRequest, "list_podsandbox"), (pb.ListContainersRequest, "list_containers"),
    (pb.ExecSyncRequest, "exec_sync"), (pb.UpdateRuntimeConfigRequest, "update_runtime_config"),
    (pb.VersionRequest, "version"),
    (pb.ListPodSandboxStatsRequest, "list_podsandbox_stats"), (pb.PullImageRequest, "pull_image"),
])
def test_operation_type(request_type: type, expected: str) -> None:
    assert operation_type(request_type()) == expected
