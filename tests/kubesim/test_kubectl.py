"""The real kubectl against kubesim: apply (client- and server-side), get, wait, logs, delete."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.fixtures.kubesim import wait_until

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl binary"),
]

NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: {name}
"""
CLAIM = """\
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata:
  namespace: {name}
  name: gpu-claim
spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: gpu.nvidia.com
"""
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: pod1
  namespace: {name}
spec:
  restartPolicy: OnFailure
  resourceClaims:
    - name: gpu
      resourceClaimName: gpu-claim
  containers:
    - name: ctr0
      image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
      resources:
        claims:
          - name: gpu
    - name: ctr1
      image: nvcr.io/nvidia/k8s/cuda-sample:devicequery
      resources:
        claims:
          - name: gpu
"""


@pytest.fixture
def kubectl(kubesim_private, tmp_path):
    """Run kubectl with a private HOME and discovery cache, so no run sees another's cache."""
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "KUBECACHEDIR": str(tmp_path / "cache"),
        "KUBECONFIG": kubesim_private.kubeconfig,
    }

    def run(*args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            ["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60
        )
        if ok:
            assert result.returncode == 0, result.stderr
        return result

    return run


def test_it_applies_twice_and_the_second_time_is_unchanged(kubectl):
    first = kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    assert first.stdout.strip() == "namespace/dra-test created"
    second = kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    assert second.stdout.strip() == "namespace/dra-test unchanged"


def test_it_applies_the_seed_claim_and_pod_and_reapplies_them_unchanged(kubectl):
    kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    kubectl("apply", "-f", "-", stdin=CLAIM.format(name="dra-test"))
    created = kubectl("apply", "-f", "-", stdin=POD.format(name="dra-test"))
    assert created.stdout.strip() == "pod/pod1 created"
    again = kubectl("apply", "-f", "-", stdin=POD.format(name="dra-test"))
    assert again.stdout.strip() == "pod/pod1 unchanged"


def test_it_applies_server_side_without_changing_anything_the_second_time(kubectl):
    kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    manifest = CLAIM.format(name="dra-test")
    applied = kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    assert applied.stdout.strip() == "resourceclaim.resource.k8s.io/gpu-claim serverside-applied"
    before = yaml.safe_load(
        kubectl("get", "resourceclaim", "gpu-claim", "-n", "dra-test", "-o", "yaml").stdout
    )
    kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    after = yaml.safe_load(
        kubectl("get", "resourceclaim", "gpu-claim", "-n", "dra-test", "-o", "yaml").stdout
    )
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_it_rejects_unknown_fields_like_a_real_server(kubectl):
    kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    wrong = CLAIM.format(name="dra-test").replace("deviceClassName", "deviceClass")
    result = kubectl("apply", "-f", "-", stdin=wrong, ok=False)
    assert result.returncode != 0
    assert 'strict decoding error: unknown field "spec.devices.requests[0].deviceClass"' in (
        result.stderr
    )


def test_it_runs_the_seed_pod_to_success_and_shows_logs_and_allocation(kubectl):
    kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    kubectl("apply", "-f", "-", stdin=CLAIM.format(name="dra-test"))
    kubectl("apply", "-f", "-", stdin=POD.format(name="dra-test"))
    claim = yaml.safe_load(
        kubectl("get", "resourceclaim", "gpu-claim", "-n", "dra-test", "-o", "yaml").stdout
    )
    assert claim["apiVersion"] == "resource.k8s.io/v1"
    kubectl(
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/pod1",
        "-n",
        "dra-test",
        "--timeout=30s",
    )
    pods = kubectl("get", "pods", "-n", "dra-test").stdout.split("\n")
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert pods[1].split()[:3] == ["pod1", "0/2", "Completed"]
    claims = kubectl("get", "resourceclaims", "-n", "dra-test").stdout.split("\n")
    assert claims[0].split() == ["NAME", "STATE", "AGE"]
    vector_add = kubectl("logs", "pod1", "-c", "ctr0", "-n", "dra-test").stdout
    assert "Test PASSED" in vector_add
    device_query = kubectl("logs", "pod1", "-c", "ctr1", "-n", "dra-test").stdout
    assert "Result = PASS" in device_query
    with_timestamps = kubectl("logs", "pod1", "-c", "ctr0", "-n", "dra-test", "--timestamps")
    assert with_timestamps.stdout.split(" ", 1)[0].endswith("Z")
    assert kubectl("logs", "pod1", "-c", "ctr0", "-n", "dra-test", "--tail=1").stdout == "Done\n"


def test_it_deletes_a_namespace_and_everything_in_it(kubectl):
    kubectl("apply", "-f", "-", stdin=NAMESPACE.format(name="dra-test"))
    kubectl("apply", "-f", "-", stdin=CLAIM.format(name="dra-test"))
    deleted = kubectl("delete", "ns", "dra-test", "--timeout=20s")
    assert deleted.stdout.strip() == 'namespace "dra-test" deleted'
    gone = kubectl("get", "ns", "dra-test", ok=False)
    assert 'namespaces "dra-test" not found' in gone.stderr
    claims = kubectl("get", "resourceclaims", "-n", "dra-test")
    assert "No resources found" in claims.stderr


def test_it_writes_a_kubeconfig_kubectl_reads(kubesim_private, kubectl):
    assert Path(kubesim_private.kubeconfig).exists()
    assert kubectl("config", "current-context").stdout.strip() == "kubesim"
    assert "gpu-node-1" in kubectl("get", "nodes").stdout


def test_it_explains_fields_from_its_openapi_documents(kubectl):
    explained = kubectl("explain", "resourceclaim.spec.devices.requests.exactly")
    assert "deviceClassName" in explained.stdout
    assert "GROUP:      resource.k8s.io" in explained.stdout


def test_a_cordoned_node_is_tainted_as_the_node_lifecycle_controller_does(kubesim_private, kubectl):
    """kubectl cordon sets spec.unschedulable; kube-controller-manager adds the
    node.kubernetes.io/unschedulable:NoSchedule taint, after the Node's own, and takes it
    away at uncordon, leaving those."""
    node = kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}").stdout
    kubectl("taint", "node", node, "team=ml:PreferNoSchedule")

    def taints() -> list[dict]:
        return kubesim_private.admin("GET", f"/api/v1/nodes/{node}")["spec"].get("taints", [])

    kubectl("cordon", node)
    wait_until(lambda: len(taints()) == 2)
    own, cordon = taints()
    assert own == {"key": "team", "value": "ml", "effect": "PreferNoSchedule"}
    assert cordon.keys() == {"key", "effect", "timeAdded"}
    assert (cordon["key"], cordon["effect"]) == ("node.kubernetes.io/unschedulable", "NoSchedule")
    managers = kubesim_private.admin("GET", f"/api/v1/nodes/{node}")["metadata"]["managedFields"]
    assert any(
        entry["manager"] == "kube-controller-manager" and "f:taints" in entry["fieldsV1"]["f:spec"]
        for entry in managers
    )
    described = kubectl("describe", "node", node).stdout
    assert "node.kubernetes.io/unschedulable:NoSchedule" in described
    assert "Unschedulable:      true" in described

    kubectl("uncordon", node)
    wait_until(lambda: len(taints()) == 1)
    assert taints() == [own]


# kubectl's typed create commands post protobuf (issue 28): each object must arrive whole.
CREATE_COMMANDS = {
    "serviceaccount": ("serviceaccount", "sa1"),
    "role": ("role", "r1", "--verb=get,list", "--resource=pods,deployments.apps"),
    "rolebinding": ("rolebinding", "rb1", "--role=r1", "--serviceaccount=proto:sa1", "--user=u"),
    "clusterrole": ("clusterrole", "proto-cr", "--verb=get", "--non-resource-url=/healthz"),
    "clusterrolebinding": ("clusterrolebinding", "proto-crb", "--clusterrole=view", "--group=g"),
    "configmap": ("configmap", "cm1", "--from-literal=a=b", "--from-literal=c=d"),
    "secret": ("secret", "generic", "s1", "--from-literal=password=s3cret", "--type=Opaque"),
    "quota": ("quota", "q1", "--hard=pods=3,requests.cpu=500m", "--scopes=BestEffort"),
    "deployment": ("deployment", "d1", "--image=nginx", "--replicas=0", "--port=80"),
    "job": ("job", "j1", "--image=busybox", "--", "echo", "hi"),
    "service": ("service", "nodeport", "svc1", "--tcp=80:8080"),
    "ingress": ("ingress", "i1", "--rule=foo.com/bar*=svc1:80,tls=cert"),
    "poddisruptionbudget": ("poddisruptionbudget", "p1", "--selector=app=x", "--min-available=0"),
}


def _subset(sent: object, stored: object) -> bool:
    if isinstance(sent, dict) and isinstance(stored, dict):
        return all(_subset(value, stored.get(key)) for key, value in sent.items() if value)
    if isinstance(sent, list) and isinstance(stored, list):
        return len(sent) == len(stored) and all(map(_subset, sent, stored))
    return sent == stored


@pytest.mark.parametrize("command", CREATE_COMMANDS)
def test_it_accepts_the_protobuf_bodies_of_kubectl_create(kubectl, command):
    kubectl("create", "namespace", "proto")
    args = ("-n", "proto", "create", *CREATE_COMMANDS[command])
    rendered = json.loads(kubectl("--dry-run=client", "-o", "json", *args).stdout)
    created = kubectl("-v=8", *args)
    assert "Content-Type: application/vnd.kubernetes.protobuf" in created.stderr
    name = rendered["metadata"]["name"]
    stored = json.loads(kubectl("get", rendered["kind"], name, "-n", "proto", "-o", "json").stdout)
    rendered["metadata"].pop("creationTimestamp", None)
    assert _subset(rendered, stored), (rendered, stored)


def test_it_accepts_the_protobuf_token_request_of_kubectl_create_token(kubectl):
    kubectl("create", "namespace", "proto")
    kubectl("create", "serviceaccount", "sa1", "-n", "proto")
    token = kubectl("create", "token", "sa1", "-n", "proto", "--audience=a1", "--duration=1h")
    claims = token.stdout.split(".")[1]
    payload = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
    assert payload["aud"] == ["a1"]
    assert payload["exp"] - payload["iat"] == 3600
