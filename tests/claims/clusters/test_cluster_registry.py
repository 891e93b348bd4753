"""Registering clusters: kubeconfigs encrypted at rest (keys rotate), kubeconfigs checked in
plain words, in-cluster connections with a real ServiceAccount token, the first contact."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

import kubesim
from claims.clusters import credentials, gateways
from claims.clusters import registry as cluster_registry
from claims.clusters.registry import IN_CLUSTER, KUBECONFIG, ClusterInput
from claims.domain import services
from claims.kube.connection import load_configuration
from claims.models import Cluster
from tests.claims.worker.test_least_privilege import portal_identity

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def forget_gateways() -> Iterator[None]:
    yield
    gateways.forget_gateways()


def kubeconfig_text(handle: kubesim.Handle) -> str:
    return Path(handle.kubeconfig).read_text()


def raw_column(cluster: Cluster) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kubeconfig_encrypted FROM claims_cluster WHERE id = %s", [cluster.pk]
        )
        return str(cursor.fetchone()[0])


def test_it_keeps_the_kubeconfig_encrypted_and_connects_from_memory(
    kubesim_cluster: kubesim.Handle,
) -> None:
    text = kubeconfig_text(kubesim_cluster)
    data = ClusterInput("uploaded", KUBECONFIG, text, "kubesim")
    cluster = cluster_registry.save_cluster(data)
    stored = raw_column(cluster)
    assert stored and text not in stored
    for secret in (kubesim_cluster.token, kubesim_cluster.url, "certificate-authority-data"):
        assert secret not in stored
    assert cluster.kubeconfig_path == ""
    assert credentials.decrypt(stored) == text
    assert gateways.gateway_for(cluster).discover().server_version.startswith("v1.34")


def test_it_rotates_keys(kubesim_cluster: kubesim.Handle) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    text = kubeconfig_text(kubesim_cluster)
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[old]):
        cluster = cluster_registry.save_cluster(
            ClusterInput("rotating", KUBECONFIG, text, "kubesim")
        )
    before = raw_column(cluster)
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[new, old]):
        assert credentials.decrypt(before) == text  # the old key still reads it
        assert credentials.reencrypt_all() == 1
    after = raw_column(cluster)
    assert after != before
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[new]):
        assert credentials.decrypt(after) == text
        cluster.refresh_from_db()
        assert credentials.kubeconfig_of(cluster)["current-context"] == "kubesim"
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[old]), pytest.raises(ImproperlyConfigured):
        credentials.decrypt(after)


def test_it_fails_the_deploy_check_without_a_good_key() -> None:
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[]):
        errors = credentials.credentials_keys_check(None)
        assert [e.id for e in errors] == ["claims.E001"]
        assert "CLUSTER_CREDENTIALS_KEYS is not set" in errors[0].msg
        with pytest.raises(ImproperlyConfigured):
            credentials.encrypt("anything")
    with override_settings(CLUSTER_CREDENTIALS_KEYS=["not-a-key"]):
        assert [e.id for e in credentials.credentials_keys_check(None)] == ["claims.E002"]
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[Fernet.generate_key().decode()]):
        assert credentials.credentials_keys_check(None) == []


def field_errors(data: ClusterInput) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as refused:
        cluster_registry.save_cluster(data)
    return refused.value.message_dict


@pytest.mark.parametrize(
    ("text", "context", "field", "words"),
    [
        ("clusters: [oops", "", "kubeconfig", "not valid YAML (line 1)"),
        ("just text", "", "kubeconfig", "not a kubeconfig"),
        ("apiVersion: v1\nkind: Config\ncontexts: []\n", "", "kubeconfig", "has no contexts"),
        ("", "", "kubeconfig", "Upload or paste a kubeconfig"),
    ],
)
def test_it_refuses_kubeconfigs_it_cannot_use(
    text: str, context: str, field: str, words: str
) -> None:
    errors = field_errors(ClusterInput("bad", KUBECONFIG, text, context))
    assert any(words in message for message in errors[field]), errors
    assert not Cluster.objects.exists()


def test_it_refuses_an_unknown_context_and_local_references(
    kubesim_cluster: kubesim.Handle,
) -> None:
    config = yaml.safe_load(kubeconfig_text(kubesim_cluster))
    errors = field_errors(ClusterInput("bad", KUBECONFIG, yaml.safe_dump(config), "prod"))
    assert errors["context"] == ["Pick one of this kubeconfig's contexts: kubesim."]
    config["users"][0]["user"] = {"exec": {"command": "rm", "args": ["-rf", "/"]}}
    errors = field_errors(ClusterInput("bad", KUBECONFIG, yaml.safe_dump(config), "kubesim"))
    assert "credential plugin" in errors["kubeconfig"][0]
    config["users"][0]["user"] = {"tokenFile": "/etc/shadow"}
    errors = field_errors(ClusterInput("bad", KUBECONFIG, yaml.safe_dump(config), "kubesim"))
    assert "refers to a file (tokenFile)" in errors["kubeconfig"][0]
    config["users"][0]["user"] = {"token": "t"}
    config["clusters"][0]["cluster"]["certificate-authority-data"] = "not base64!"
    errors = field_errors(ClusterInput("bad", KUBECONFIG, yaml.safe_dump(config), "kubesim"))
    assert errors["kubeconfig"][0].startswith("It cannot be used: cannot load the cluster")
    assert not Cluster.objects.exists()


def test_it_refuses_a_name_taken(kubesim_cluster: kubesim.Handle) -> None:
    text = kubeconfig_text(kubesim_cluster)
    cluster_registry.save_cluster(ClusterInput("one", KUBECONFIG, text, "kubesim"))
    errors = field_errors(ClusterInput("one", KUBECONFIG, text, "kubesim"))
    assert errors["name"] == ["A cluster named 'one' is already registered."]


def test_it_connects_in_cluster_with_a_service_account_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with kubesim.start(speed=50) as handle:
        kubeconfig = yaml.safe_load(portal_identity(handle, tmp_path / "sa.kubeconfig").read_text())
        mounted = tmp_path / "serviceaccount"
        mounted.mkdir()
        (mounted / "token").write_text(kubeconfig["users"][0]["user"]["token"])
        (mounted / "ca.crt").write_bytes(handle.ca_pem)
        host, port = handle.url.removeprefix("https://").split(":")
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
        with override_settings(KUBE_SERVICE_ACCOUNT_DIR=str(mounted)):
            cluster = cluster_registry.save_cluster(ClusterInput("here", IN_CLUSTER))
            outcome = cluster_registry.contact(cluster)
            assert outcome.reachable, outcome.problem
            assert all(check.ok for check in outcome.preflight), outcome.preflight
            cluster.refresh_from_db()
            assert cluster.in_cluster and not cluster.kubeconfig_encrypted
            assert cluster.preferred_resource_version == "v1"
            assert cluster.inventory["devices"]
            # The sync's gateway reads the same files.
            assert gateways.gateway_for(cluster).list_namespaces("") != []


def swapped_ca(text: str, ca_pem: bytes) -> str:
    config = yaml.safe_load(text)
    config["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        ca_pem
    ).decode()
    return yaml.safe_dump(config)


def with_token(text: str, token: str) -> str:
    config = yaml.safe_load(text)
    config["users"][0]["user"]["token"] = token
    return yaml.safe_dump(config)


def test_it_says_why_a_cluster_is_unreachable_and_registers_it_anyway(
    kubesim_cluster: kubesim.Handle, kubesim_private: kubesim.Handle
) -> None:
    text = kubeconfig_text(kubesim_private)
    variant = swapped_ca(text, kubesim_cluster.ca_pem)
    cluster = cluster_registry.save_cluster(
        ClusterInput("untrusted", KUBECONFIG, variant, "kubesim")
    )
    outcome = cluster_registry.contact(cluster)
    assert "certificate not trusted" in outcome.problem, outcome.problem
    cluster.refresh_from_db()
    assert cluster.unreachable_since is not None and "certificate not trusted" in cluster.last_error
    # A 401 is an answer: reachable, but refused (tests/claims/clusters/test_refused_cluster.py)
    variant = with_token(text, "wrong")
    cluster = cluster_registry.save_cluster(
        ClusterInput("unauthorised", KUBECONFIG, variant, "kubesim")
    )
    outcome = cluster_registry.contact(cluster)
    assert outcome.reachable and outcome.refused and outcome.missing == []
    cluster.refresh_from_db()
    assert cluster.unreachable_since is None and cluster.refused_since is not None
    assert cluster.last_error == "unauthorised: the cluster did not accept the credentials"
    kubesim_private.stop()
    down = cluster_registry.save_cluster(ClusterInput("down", KUBECONFIG, text, "kubesim"))
    assert "connection refused" in cluster_registry.contact(down).problem
    down.refresh_from_db()
    assert cluster_registry.picker_label(down).startswith("down (unreachable since ")


def test_unreachable_since_keeps_the_first_failure(
    cluster: Cluster, django_assert_num_queries: Any
) -> None:
    # The reason and the time in one statement: nothing can clear one between the two.
    with django_assert_num_queries(1):
        cluster_registry.mark_unreachable(cluster.pk, "connection refused")
    first = Cluster.objects.get(pk=cluster.pk).unreachable_since
    cluster_registry.mark_unreachable(cluster.pk, "no answer in time (timed out)")
    again = Cluster.objects.get(pk=cluster.pk)
    assert again.unreachable_since == first and again.last_error.startswith("no answer")
    later = first + timedelta(minutes=5)
    assert cluster_registry.status_label(again, later).endswith(", 5\xa0minutes ago")
    just_now = cluster_registry.status_label(again, first + timedelta(seconds=20))
    assert just_now.endswith(" UTC, just now") and "0\xa0minutes" not in just_now
    cluster_registry.mark_reachable(cluster.pk)
    assert Cluster.objects.get(pk=cluster.pk).unreachable_since is None
    assert cluster_registry.picker_label(Cluster.objects.get(pk=cluster.pk)) == cluster.name


def test_it_removes_a_cluster_only_when_nothing_lives_on_it(
    cluster: Cluster, alice: Any, carol: Any
) -> None:
    ns = services.namespace_request_submit(user=alice, cluster=cluster, name="team-a")
    with pytest.raises(ValidationError, match="still has 1 live request"):
        cluster_registry.remove_cluster(cluster)
    services.namespace_request_reject(user=carol, namespace_request=ns, reason="no")
    assert cluster_registry.past_requests(cluster) == 1
    cluster_registry.remove_cluster(cluster)
    assert not Cluster.objects.filter(pk=cluster.pk).exists()


def client_certificate() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "admin")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def test_it_loads_credentials_without_writing_a_file(kubesim_cluster: kubesim.Handle) -> None:
    certificate, key = client_certificate()
    config = yaml.safe_load(kubeconfig_text(kubesim_cluster))
    config["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(certificate).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    before = set(os.listdir(tempfile.gettempdir()))
    configuration = load_configuration(None, "kubesim", False, kubeconfig=config)
    assert set(os.listdir(tempfile.gettempdir())) - before == set()
    assert configuration.ssl_ca_cert is None
    assert configuration.ca_cert_data == kubesim_cluster.ca_pem.decode()
    for path, content in ((configuration.cert_file, certificate), (configuration.key_file, key)):
        assert path.startswith("/proc/self/fd/")
        assert Path(path).read_bytes() == content


def test_the_rotation_command_reencrypts_with_the_newest_key(
    kubesim_cluster: kubesim.Handle,
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    text = kubeconfig_text(kubesim_cluster)
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[old]):
        cluster = cluster_registry.save_cluster(ClusterInput("c", KUBECONFIG, text, "kubesim"))
    out = io.StringIO()
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[new, old]):
        call_command("rotate_cluster_credentials", stdout=out)
    assert out.getvalue() == "Re-encrypted 1 kubeconfig(s) with the newest key.\n"
    with override_settings(CLUSTER_CREDENTIALS_KEYS=[new]):
        assert credentials.decrypt(raw_column(cluster)) == text


def test_ensure_cluster_makes_the_settings_the_truth_for_its_cluster(
    kubesim_cluster: kubesim.Handle, kubesim_private: kubesim.Handle
) -> None:
    text = kubeconfig_text(kubesim_private)
    cluster_registry.save_cluster(ClusterInput("default", KUBECONFIG, text, "kubesim"))
    call_command(
        "ensure_cluster",
        name="default",
        kubeconfig=kubesim_cluster.kubeconfig,
        stdout=io.StringIO(),
    )
    cluster = Cluster.objects.get(name="default")
    assert cluster.kubeconfig_encrypted == ""
    assert cluster.kubeconfig_path == kubesim_cluster.kubeconfig


def test_the_deploy_check_of_a_production_environment_needs_the_keys(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    env = {k: v for k, v in os.environ.items() if k not in ("CLUSTER_CREDENTIALS_KEYS", "DEBUG")}
    env |= {"SECRET_KEY": "k" * 50, "PORTAL_VAR_DIR": str(tmp_path)}
    command = [sys.executable, "manage.py", "check", "--deploy", "--tag", "security"]
    refused = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert refused.returncode != 0
    assert "(claims.E001) CLUSTER_CREDENTIALS_KEYS is not set" in refused.stderr
    env["CLUSTER_CREDENTIALS_KEYS"] = Fernet.generate_key().decode()
    passed = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert "claims.E00" not in passed.stderr + passed.stdout
