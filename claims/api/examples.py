"""Examples shown in the OpenAPI schema and Swagger UI (what a real exchange looks like)."""

from __future__ import annotations

from typing import Any

WHEN = "2026-11-30T09:00:00Z"
LATER = "2026-11-30T09:00:12Z"

DEVICE: dict[str, Any] = {
    "request": "gpu",
    "driver": "gpu.nvidia.com",
    "pool": "gpu-node-1",
    "device": "gpu-0",
    "attributes": {"productName": "NVIDIA H100 80GB HBM3", "architecture": "Hopper"},
    "capacity": {"memory": "81559Mi"},
    "taints": [],
}

INVENTORY_DEVICE: dict[str, Any] = {
    "node": "gpu-node-1",
    "driver": "gpu.nvidia.com",
    "pool": "gpu-node-1",
    "name": "gpu-0",
    "attributes": {"type": "gpu", "productName": "NVIDIA H100 80GB HBM3"},
    "capacity": {"memory": "81559Mi"},
}

CLUSTER: dict[str, Any] = {
    "id": 1,
    "name": "kubesim",
    "simulated": True,
    "server_version": "v1.34.1",
    "resource_versions": ["v1", "v1beta2", "v1beta1"],
    "preferred_resource_version": "v1",
    "device_classes": [
        {
            "name": "gpu.nvidia.com",
            "selectors": ["device.driver == 'gpu.nvidia.com'"],
            "device_count": 8,
        }
    ],
    "inventory_synced_at": WHEN,
    "last_synced_at": WHEN,
    "last_error": "",
    "reachable": True,
    "unreachable_since": None,
    "refused_since": None,
    "missing_permissions": [],
}

NAMESPACE_REQUEST: dict[str, Any] = {
    "id": 3,
    "cluster": 1,
    "cluster_name": "kubesim",
    "name": "team-vision",
    "purpose": "Training the detector",
    "state": "pending",
    "state_message": "Requested.",
    "owner": "alice",
    "decided_by": None,
    "decided_at": None,
    "access_granted_at": None,
    "created": WHEN,
    "updated": WHEN,
}

CLAIM_REQUEST: dict[str, Any] = {
    "id": 7,
    "cluster": 1,
    "cluster_name": "kubesim",
    "namespace_request": 3,
    "namespace": "team-vision",
    "name": "gpu-claim",
    "device_class": "gpu.nvidia.com",
    "count": 1,
    "all_devices": False,
    "selector": "",
    "purpose": "",
    "state": "in_use",
    "state_message": "Allocated gpu-0 on gpu-node-1.",
    "owner": "alice",
    "decided_by": "carol",
    "decided_at": WHEN,
    "applied_api_version": "resource.k8s.io/v1",
    "applied_at": WHEN,
    "node": "gpu-node-1",
    "allocation": {"node": "gpu-node-1", "devices": [DEVICE], "reserved_for": ["pod1"]},
    "created": WHEN,
    "updated": LATER,
}

VERIFICATION_RUN: dict[str, Any] = {
    "id": 12,
    "claim": 7,
    "claim_name": "gpu-claim",
    "namespace": "team-vision",
    "cluster_name": "kubesim",
    "pod_name": "gpu-claim-verify-12",
    "state": "succeeded",
    "state_message": "CUDA samples passed.",
    "pod_stage": "",
    "pod_warnings": [],
    "owner": "alice",
    "node": "gpu-node-1",
    "devices": [DEVICE],
    "passed": True,
    "verdict": "passed",
    "verdict_reason": "",
    "vector_add_passed": True,
    "device_query_passed": True,
    "device_name": "NVIDIA H100 80GB HBM3",
    "compute_capability": "9.0",
    "memory_mib": 81559,
    "started_at": WHEN,
    "finished_at": LATER,
    "logs": [
        {
            "container": "ctr0",
            "url": "/api/v1/runs/12/logs/ctr0/",
            "length": 182,
            "truncated": False,
        },
        {
            "container": "ctr1",
            "url": "/api/v1/runs/12/logs/ctr1/",
            "length": 2304,
            "truncated": False,
        },
    ],
    "queue": None,
    "created": WHEN,
    "updated": LATER,
}

AUDIT_EVENT: dict[str, Any] = {
    "id": 40,
    "object_kind": "claim_request",
    "object_id": 7,
    "object_name": "gpu-claim",
    "owner": "alice",
    "actor": "carol",
    "from_state": "pending",
    "to_state": "approved",
    "message": "Approved.",
    "created": WHEN,
}

ME: dict[str, Any] = {"username": "alice", "is_approver": False}

VECTOR_ADD_LOG = (
    "[Vector addition of 50000 elements]\n"
    "Copy input data from the host memory to the CUDA device\n"
    "CUDA kernel launch with 196 blocks of 256 threads\n"
    "Copy output data from the CUDA device to the host memory\n"
    "Test PASSED\n"
    "Done\n"
)

PENDING_CLAIM: dict[str, Any] = {
    **CLAIM_REQUEST,
    "state": "pending",
    "state_message": "Requested.",
    "decided_by": None,
    "decided_at": None,
    "applied_api_version": "",
    "applied_at": None,
    "node": "",
    "allocation": None,
    "updated": WHEN,
}

QUEUED_RUN: dict[str, Any] = {
    **VERIFICATION_RUN,
    "state": "queued",
    "state_message": "Queued.",
    "node": "",
    "devices": [],
    "passed": None,
    "verdict": "pending",
    "verdict_reason": "",
    "vector_add_passed": None,
    "device_query_passed": None,
    "device_name": "",
    "compute_capability": "",
    "memory_mib": None,
    "started_at": None,
    "finished_at": None,
    "logs": [
        {"container": "ctr0", "url": "/api/v1/runs/12/logs/ctr0/", "length": 0, "truncated": False},
        {"container": "ctr1", "url": "/api/v1/runs/12/logs/ctr1/", "length": 0, "truncated": False},
    ],
    "updated": WHEN,
}

CANCELLED_RUN: dict[str, Any] = {
    **QUEUED_RUN,
    "state": "failed",
    "state_message": "Cancelled by alice.",
    "verdict": "unknown",
    "verdict_reason": "the run ended before the samples gave a verdict",
    "node": "gpu-node-1",
    "devices": [DEVICE],
    "started_at": WHEN,
    "finished_at": LATER,
    "updated": LATER,
}

KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {
            "name": "kubesim",
            "cluster": {
                "server": "https://127.0.0.1:6443",
                "certificate-authority-data": "LS0tLS1CRUdJTi...",
            },
        }
    ],
    "users": [{"name": "alice-team-vision", "user": {"token": "eyJhbGciOiJSUzI1NiIs..."}}],
    "contexts": [
        {
            "name": "alice-team-vision@kubesim",
            "context": {
                "cluster": "kubesim",
                "user": "alice-team-vision",
                "namespace": "team-vision",
            },
        }
    ],
    "current-context": "alice-team-vision@kubesim",
}

WORKLOAD_PROFILE: dict[str, Any] = {
    "id": 2,
    "name": "Batch job: your image and command",
    "kind": "job",
    "description": "Runs your image and command once on your claim's GPU and ends.",
    "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
    "command": "nvidia-smi",
    "args": "",
    "env": {},
    "cpu_request": "1",
    "cpu_limit": "4",
    "memory_request": "2Gi",
    "memory_limit": "8Gi",
    "ports": [],
    "allow_any_image": True,
    "allowed_images": [],
    "active_deadline_seconds": None,
    "backoff_limit": 2,
    "active": True,
    "created": WHEN,
    "updated": WHEN,
}

WORKLOAD: dict[str, Any] = {
    "id": 31,
    "claim": 7,
    "claim_name": "gpu-claim",
    "namespace": "team-a",
    "cluster_name": "berlin-a100",
    "profile": 2,
    "profile_name": "Batch job: your image and command",
    "kind": "job",
    "name": "gpu-claim-job-31",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "command": "python train.py",
    "args": "--epochs 3 --out /tmp/model",
    "env": {"WANDB_MODE": "offline"},
    "resources": {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "4", "memory": "8Gi"},
    },
    "ports": [],
    "state": "running",
    "state_message": "Running on gpu-node-1.",
    "owner": "alice",
    "node": "gpu-node-1",
    "started_at": LATER,
    "finished_at": None,
    "access": None,
    "kueue": None,
    "queue": None,
    "created": WHEN,
    "updated": LATER,
}

STOPPED_WORKLOAD: dict[str, Any] = {
    **WORKLOAD,
    "state": "stopped",
    "state_message": "Stopped by alice.",
    "finished_at": LATER,
}

TRAIN_LOG = (
    "train-sim: 1 GPU(s) visible: NVIDIA H100 80GB HBM3\n"
    "epoch 1/1 step 1/2 loss 0.9966\n"
    "epoch 1/1 step 2/2 loss 0.2391\n"
    "train-sim: done\n"
)
