from datetime import UTC, datetime

from claims.kube import parsing, pod_parsing


def resource_slice(devices: list[dict], generation: int = 1, node: str = "node-a") -> dict:
    return {
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": devices,
        }
    }


H100_ATTRIBUTES = {
    "productName": {"string": "NVIDIA H100 80GB HBM3"},
    "cudaComputeCapability": {"version": "9.0.0"},
    "index": {"int": 0},
    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:3a"},
}


def test_it_flattens_a_v1_device() -> None:
    device = {
        "name": "gpu-0",
        "attributes": H100_ATTRIBUTES,
        "capacity": {"memory": {"value": "80Gi"}},
    }

    [info] = parsing.devices_from_slices([resource_slice([device])])

    assert (info.node, info.driver, info.pool, info.name) == (
        "node-a",
        "gpu.nvidia.com",
        "node-a",
        "gpu-0",
    )
    assert info.attributes == {
        "productName": "NVIDIA H100 80GB HBM3",
        "cudaComputeCapability": "9.0.0",
        "index": 0,
        "resource.kubernetes.io/pcieRoot": "pci0000:3a",
    }
    assert info.capacity == {"memory": "80Gi"}


def test_it_reads_a_v1beta1_device_under_basic() -> None:
    device = {
        "name": "gpu-0",
        "basic": {"attributes": H100_ATTRIBUTES, "capacity": {"memory": {"value": "80Gi"}}},
    }

    [info] = parsing.devices_from_slices([resource_slice([device])])

    assert info.attributes["productName"] == "NVIDIA H100 80GB HBM3"
    assert info.capacity == {"memory": "80Gi"}


def test_it_ignores_slices_of_an_older_pool_generation() -> None:
    stale = resource_slice([{"name": "gpu-9"}], generation=1)
    current = resource_slice([{"name": "gpu-0"}], generation=2)

    devices = parsing.devices_from_slices([stale, current])

    assert [d.name for d in devices] == ["gpu-0"]


def test_it_reads_an_unallocated_claim() -> None:
    claim = {"metadata": {"namespace": "ns", "name": "c", "uid": "u"}, "status": {}}

    state = parsing.claim_state(claim)

    assert (state.allocated, state.node, state.devices, state.reserved_for) == (
        False,
        None,
        [],
        [],
    )


def test_it_reads_the_allocated_node_and_devices() -> None:
    claim = {
        "metadata": {"namespace": "ns", "name": "c", "uid": "u"},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "n1",
                            "device": "gpu-3",
                            "adminAccess": None,
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "pod1", "uid": "p"}],
        },
    }

    state = parsing.claim_state(claim)

    assert state.allocated and state.node == "n1"
    assert state.devices == [parsing.AllocatedDevice("gpu", "gpu.nvidia.com", "n1", "gpu-3")]
    assert state.reserved_for == ["pod1"]


def test_it_explains_an_unschedulable_pod() -> None:
    message = "0/2 nodes are available: 2 cannot allocate all claims."
    pod = {
        "metadata": {"namespace": "ns", "name": "pod1"},
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                }
            ],
        },
    }

    state = pod_parsing.pod_state(pod)

    assert (state.phase, state.node, state.reason, state.message) == (
        "Pending",
        None,
        "Unschedulable",
        message,
    )
    assert state.containers == []


def test_it_reads_container_states_and_when_the_pod_finished() -> None:
    pod = {
        "metadata": {"namespace": "ns", "name": "pod1"},
        "spec": {"nodeName": "n1"},
        "status": {
            "phase": "Failed",
            "startTime": "2026-11-30T07:00:00Z",
            "containerStatuses": [
                {
                    "name": "ctr0",
                    "state": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "finishedAt": "2026-11-30T07:00:05Z",
                        }
                    },
                },
                {
                    "name": "ctr1",
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "finishedAt": "2026-11-30T07:00:03Z",
                        }
                    },
                },
            ],
        },
    }

    state = pod_parsing.pod_state(pod)

    assert [(c.name, c.state, c.exit_code, c.reason) for c in state.containers] == [
        ("ctr0", "terminated", 1, "Error"),
        ("ctr1", "terminated", 0, "Completed"),
    ]
    assert state.started_at == datetime(2026, 11, 30, 7, 0, 0, tzinfo=UTC)
    assert state.finished_at == datetime(2026, 11, 30, 7, 0, 5, tzinfo=UTC)


def test_it_has_no_finish_time_while_a_container_runs() -> None:
    pod = {
        "metadata": {"namespace": "ns", "name": "pod1"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "ctr0",
                    "state": {"terminated": {"exitCode": 0, "finishedAt": "2026-11-30T07:00:05Z"}},
                },
                {"name": "ctr1", "state": {"running": {"startedAt": "2026-11-30T07:00:01Z"}}},
            ],
        },
    }

    assert pod_parsing.pod_state(pod).finished_at is None


def test_it_reads_timestamped_log_lines_from_since_on() -> None:
    body = (
        b"2026-11-30T07:00:00.123456789Z [Vector addition of 50000 elements]\n"
        b"2026-11-30T07:00:01.000000000Z Test PASSED\r\n"
        b"2026-11-30T07:00:01.000000000Z Done\n"
        b"garbage without a timestamp\n"
    )

    every = pod_parsing.log_lines(body, None)
    from_second = pod_parsing.log_lines(body, every[1].timestamp)

    assert [line.text for line in every] == [
        "[Vector addition of 50000 elements]",
        "Test PASSED",
        "Done",
    ]
    assert every[0].timestamp == datetime(2026, 11, 30, 7, 0, 0, 123456, tzinfo=UTC)
    # Inclusive: lines sharing the timestamp of the last one read come again.
    assert [line.text for line in from_second] == ["Test PASSED", "Done"]
