"""Access for users: a ServiceAccount, its RoleBinding, a token and a kubeconfig for it."""

import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from claims.kube import manifests
from claims.kube.gateway import ClusterGateway, PermanentKubeError
from tests.fixtures.kubesim import create_namespace

LABELS = {"gpu-portal.io/namespace-request": "3"}


def write(path: Path, kubeconfig: dict) -> str:
    path.write_text(yaml.safe_dump(kubeconfig))
    return str(path)


def test_it_writes_a_kubeconfig_for_a_token(kubesim_cluster: Any, tmp_path: Path) -> None:
    with ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as gw:
        kubeconfig = gw.kubeconfig_for(
            token=kubesim_cluster.token, namespace="team-a", cluster_name="lab", user_name="alice"
        )

    [cluster] = kubeconfig["clusters"]
    assert cluster == {
        "name": "lab",
        "cluster": {
            "server": kubesim_cluster.url,
            "certificate-authority-data": base64.b64encode(kubesim_cluster.ca_pem).decode(),
        },
    }
    assert kubeconfig["users"] == [{"name": "alice", "user": {"token": kubesim_cluster.token}}]
    [context] = kubeconfig["contexts"]
    assert kubeconfig["current-context"] == context["name"]
    assert context["context"] == {"cluster": "lab", "user": "alice", "namespace": "team-a"}
    with ClusterGateway(kubeconfig_path=write(tmp_path / "alice", kubeconfig)) as alice:
        assert alice.read("v1", "Namespace", None, "default") is not None


def test_it_skips_tls_verification_only_if_the_source_did(
    kubesim_cluster: Any, tmp_path: Path
) -> None:
    source = yaml.safe_load(Path(kubesim_cluster.kubeconfig).read_text())
    source["clusters"][0]["cluster"] = {
        "server": kubesim_cluster.url,
        "insecure-skip-tls-verify": True,
    }
    with ClusterGateway(kubeconfig_path=write(tmp_path / "insecure", source)) as gw:
        kubeconfig = gw.kubeconfig_for(
            token="t", namespace="team-a", cluster_name="lab", user_name="alice"
        )

    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": kubesim_cluster.url,
        "insecure-skip-tls-verify": True,
    }


def test_a_service_account_token_reaches_its_namespace_only(
    kubesim_cluster: Any, tmp_path: Path
) -> None:
    namespace, other = create_namespace(kubesim_cluster), create_namespace(kubesim_cluster)
    subject = {"kind": "ServiceAccount", "name": "alice", "namespace": namespace}
    with ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as admin:
        admin.apply(
            manifests.service_account_manifest(namespace=namespace, name="alice", labels=LABELS)
        )
        binding = manifests.role_binding_manifest(
            namespace=namespace,
            name="alice",
            cluster_role="edit",
            subjects=[subject],
            labels=LABELS,
        )
        admin.apply(binding)
        token, expires = admin.request_token(namespace, "alice", expiration_seconds=3600)
        kubeconfig = admin.kubeconfig_for(
            token=token, namespace=namespace, cluster_name="lab", user_name="alice"
        )

    assert abs(expires - (datetime.now(UTC) + timedelta(hours=1))) < timedelta(minutes=1)
    with ClusterGateway(kubeconfig_path=write(tmp_path / "alice", kubeconfig)) as alice:
        assert alice.read("v1", "ServiceAccount", namespace, "alice") is not None
        with pytest.raises(PermanentKubeError) as caught:
            alice.read("v1", "ServiceAccount", other, "default")
    assert caught.value.status == 403


def test_it_refuses_a_token_for_a_missing_service_account(kubesim_cluster: Any) -> None:
    namespace = create_namespace(kubesim_cluster)
    with (
        ClusterGateway(kubeconfig_path=kubesim_cluster.kubeconfig) as gw,
        pytest.raises(PermanentKubeError) as caught,
    ):
        gw.request_token(namespace, "nobody", expiration_seconds=600, audiences=["x"])

    assert caught.value.status == 404
