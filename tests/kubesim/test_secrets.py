"""core/v1 Secrets: stringData merged into data, ValidateSecret's messages, tables, deletion."""

import base64
import json
import subprocess

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import kubesim
from kubesim.registry.kinds.secrets import go_json_error
from tests.fixtures.kubesim import api_client, create_namespace, raw_request, wait_until

AUTHS = {"auths": {"registry.airgap.example": {"username": "u", "password": "p", "auth": "dTpw"}}}


@pytest.fixture
def namespace(kubesim_module: kubesim.Handle) -> str:
    return create_namespace(kubesim_module, "secrets")


def secret_body(name: str, secret_type: str, **fields: object) -> dict:
    return {"metadata": {"name": name}, "type": secret_type, **fields}


def post(cluster: kubesim.Handle, namespace: str, body: dict) -> object:
    return raw_request(cluster, "POST", f"/api/v1/namespaces/{namespace}/secrets", body)


def test_string_data_is_stored_base64_in_data(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    core = client.CoreV1Api(api_client(kubesim_module))
    body = client.V1Secret(
        metadata=client.V1ObjectMeta(name="pull"),
        type="kubernetes.io/dockerconfigjson",
        string_data={".dockerconfigjson": json.dumps(AUTHS)},
    )
    created = core.create_namespaced_secret(namespace, body)
    assert created.string_data is None
    assert json.loads(base64.b64decode(created.data[".dockerconfigjson"])) == AUTHS
    plain = core.create_namespaced_secret(
        namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="plain"))
    )
    assert plain.type == "Opaque"


def test_string_data_overwrites_data(kubesim_module: kubesim.Handle, namespace: str) -> None:
    body = secret_body("both", "Opaque", data={"a": "eA==", "b": "eQ=="}, stringData={"a": "new"})
    response = post(kubesim_module, namespace, body)
    assert response.status == 201
    assert response.json()["data"] == {"a": "bmV3", "b": "eQ=="}
    assert "stringData" not in response.json()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, 'Secret "bad" is invalid: data[.dockerconfigjson]: Required value'),
        (
            {"stringData": {".dockerconfigjson": "{not json"}},
            'Secret "bad" is invalid: data[.dockerconfigjson]: Invalid value: '
            "\"<secret contents redacted>\": invalid character 'n' looking for beginning "
            "of object key string",
        ),
        (
            {"stringData": {".dockerconfigjson": "[]"}},
            'Secret "bad" is invalid: data[.dockerconfigjson]: Invalid value: '
            '"<secret contents redacted>": json: cannot unmarshal array into Go value of '
            "type map[string]interface {}",
        ),
        (
            {"stringData": {".dockerconfigjson": "{}", "no/slash": "x"}},
            'Secret "bad" is invalid: data[no/slash]: Invalid value: "no/slash": a valid config '
            "key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
            "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
        ),
    ],
)
def test_a_docker_config_json_secret_is_validated(
    kubesim_module: kubesim.Handle, namespace: str, fields: dict, message: str
) -> None:
    response = post(
        kubesim_module, namespace, secret_body("bad", "kubernetes.io/dockerconfigjson", **fields)
    )
    assert response.status == 422
    assert response.json()["message"] == message


def test_data_that_is_not_base64_is_a_bad_request(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    response = post(kubesim_module, namespace, secret_body("b64", "Opaque", data={"k": "no!"}))
    assert response.status == 400
    assert response.json()["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 2'
    )


def test_type_is_immutable_and_immutable_secrets_keep_their_data(
    kubesim_module: kubesim.Handle, namespace: str
) -> None:
    core = client.CoreV1Api(api_client(kubesim_module))
    core.create_namespaced_secret(
        namespace, client.V1Secret(metadata=client.V1ObjectMeta(name="fixed"), immutable=True)
    )
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_secret("fixed", namespace, {"type": "kubernetes.io/tls"})
    assert json.loads(caught.value.body)["message"] == (
        'Secret "fixed" is invalid: [type: Invalid value: "kubernetes.io/tls": field is '
        "immutable, data[tls.crt]: Required value, data[tls.key]: Required value]"
    )
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_secret("fixed", namespace, {"stringData": {"k": "v"}})
    assert json.loads(caught.value.body)["message"] == (
        'Secret "fixed" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )


def test_kubectl_lists_type_and_data_count(kubesim_module: kubesim.Handle, namespace: str) -> None:
    body = secret_body(
        "regcred", "kubernetes.io/dockerconfigjson", stringData={".dockerconfigjson": "{}"}
    )
    assert post(kubesim_module, namespace, body).status == 201
    result = subprocess.run(
        ["kubectl", "--kubeconfig", kubesim_module.kubeconfig, "-n", namespace, "get", "secrets"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAME", "TYPE", "DATA", "AGE"]
    assert row.split()[:3] == ["regcred", "kubernetes.io/dockerconfigjson", "1"]


def test_secrets_go_with_their_namespace(kubesim_module: kubesim.Handle) -> None:
    namespace = create_namespace(kubesim_module, "gone")
    assert post(kubesim_module, namespace, secret_body("s", "Opaque")).status == 201
    raw_request(kubesim_module, "DELETE", f"/api/v1/namespaces/{namespace}")
    wait_until(
        lambda: (
            raw_request(kubesim_module, "GET", f"/api/v1/namespaces/{namespace}/secrets/s").status
            == 404
        ),
        timeout=15,
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"nope", "invalid character 'o' in literal null (expecting 'u')"),
        (b'{"auths": ', "unexpected end of JSON input"),
        (b'{"a":1} x', "invalid character 'x' after top-level value"),
        (b"null", ""),
        (b"{}", ""),
    ],
)
def test_json_errors_read_as_go_writes_them(raw: bytes, message: str) -> None:
    assert go_json_error(raw) == message
