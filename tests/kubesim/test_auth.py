"""TLS with kubesim's own CA for every request; a bearer token, or RBAC for system:anonymous."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from kubernetes import client, config

import kubesim
from tests.fixtures.kubesim import api_client, raw_request


def test_it_answers_a_request_without_a_token_as_system_anonymous(kubesim_cluster):
    response = raw_request(kubesim_cluster, "GET", "/api/v1/namespaces", token=None)
    assert response.status == 403
    assert response.json()["message"] == (
        'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" '
        'in API group "" at the cluster scope'
    )
    assert raw_request(kubesim_cluster, "GET", "/version", token=None).status == 200


def test_it_answers_401_status_without_a_token_when_anonymous_auth_is_off():
    handle = kubesim.start(anonymous_auth=False)
    try:
        response = raw_request(handle, "GET", "/api/v1/namespaces", token=None)
    finally:
        handle.stop()
    assert response.status == 401
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


def test_it_answers_401_with_a_wrong_token(kubesim_cluster):
    response = raw_request(kubesim_cluster, "GET", "/version", token="not-the-token")
    assert response.status == 401


def test_it_answers_with_the_right_token(kubesim_cluster):
    response = raw_request(kubesim_cluster, "GET", "/version")
    assert response.status == 200
    assert response.json()["gitVersion"] == "v1.34.1"


def test_it_rejects_the_official_client_with_a_wrong_token(kubesim_cluster, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    text = Path(kubesim_cluster.kubeconfig).read_text()
    kubeconfig.write_text(text.replace(kubesim_cluster.token, "wrong-token"))
    api = config.new_client_from_config(config_file=str(kubeconfig))
    with pytest.raises(client.ApiException) as caught:
        client.CoreV1Api(api).list_namespace()
    assert caught.value.status == 401
    assert client.CoreV1Api(api_client(kubesim_cluster)).list_namespace().items


def test_it_serves_healthz_without_a_token(kubesim_cluster):
    response = raw_request(kubesim_cluster, "GET", "/_kubesim/healthz", token=None)
    assert response.json() == {"ok": True}


def test_it_guards_the_admin_api_with_the_token(kubesim_cluster):
    response = raw_request(kubesim_cluster, "GET", "/_kubesim/counters", token=None)
    assert response.status == 403
    assert raw_request(kubesim_cluster, "GET", "/_kubesim/counters", token="x").status == 401


def test_it_speaks_only_tls(kubesim_cluster):
    url = urlsplit(kubesim_cluster.url)
    with socket.create_connection((url.hostname, url.port), timeout=5) as plain:
        plain.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = plain.recv(100)
    assert not answer.startswith(b"HTTP/1.1 200")
    assert raw_request(kubesim_cluster, "GET", "/version").status == 200


def test_it_presents_a_certificate_signed_by_its_ca_for_localhost(kubesim_cluster):
    url = urlsplit(kubesim_cluster.url)
    context = ssl.create_default_context(cadata=kubesim_cluster.ca_pem.decode())
    with (
        socket.create_connection((url.hostname, url.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
    untrusting = ssl.create_default_context()
    with (
        socket.create_connection((url.hostname, url.port), timeout=5) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        untrusting.wrap_socket(raw, server_hostname="127.0.0.1")


def test_it_writes_a_kubeconfig_with_ca_token_and_context(kubesim_cluster):
    _, active = config.list_kube_config_contexts(kubesim_cluster.kubeconfig)
    assert active["name"] == "kubesim"
    text = Path(kubesim_cluster.kubeconfig).read_text()
    assert kubesim_cluster.token in text
    assert "certificate-authority-data" in text
    assert kubesim_cluster.url in text
