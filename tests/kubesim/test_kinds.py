"""The kinds registry: names, versions, defaults, field errors as the API server renders them."""

from kubesim.registry.kinds import KINDS, FieldError, find_kind, invalid_message, kind_for
from kubesim.registry.validation import OMIT

CLAIMS = kind_for("resource.k8s.io", "resourceclaims")


def test_it_serves_core_and_resource_kinds() -> None:
    plurals = {(group, plural) for group, plural in KINDS}
    assert {
        ("", "namespaces"),
        ("", "nodes"),
        ("", "pods"),
        ("", "events"),
        ("", "resourcequotas"),
        ("resource.k8s.io", "deviceclasses"),
        ("resource.k8s.io", "resourceslices"),
        ("resource.k8s.io", "resourceclaims"),
        ("resource.k8s.io", "resourceclaimtemplates"),
    } <= plurals
    assert CLAIMS.namespaced and "status" in CLAIMS.subresources
    assert not kind_for("resource.k8s.io", "resourceslices").namespaced
    assert "log" in kind_for("", "pods").subresources


def test_it_finds_a_kind_by_its_kind_name() -> None:
    assert find_kind("resource.k8s.io", "ResourceClaim") is CLAIMS
    assert find_kind("", "Pod") is kind_for("", "pods")
    assert find_kind("resource.k8s.io", "Pod") is None


def test_it_serves_the_configured_resource_versions_only() -> None:
    class Config:
        served_versions = ("v1beta1",)

    assert CLAIMS.served_versions(Config()) == ["v1beta1"]
    assert CLAIMS.served_versions(("v1beta1", "v1")) == ["v1", "v1beta1"]
    assert CLAIMS.served_versions(None) == ["v1", "v1beta2", "v1beta1"]
    assert kind_for("", "pods").served_versions(Config()) == ["v1"]


def test_it_defaults_a_claim_request_to_one_device() -> None:
    claim = {
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x"}}]}}
    }
    CLAIMS.apply_defaults(claim)
    exact = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert exact == {"deviceClassName": "x", "allocationMode": "ExactCount", "count": 1}


def test_it_leaves_count_unset_for_all_mode() -> None:
    exact = {"deviceClassName": "x", "allocationMode": "All"}
    CLAIMS.apply_defaults({"spec": {"devices": {"requests": [{"name": "a", "exactly": exact}]}}})
    assert "count" not in exact


def test_it_defaults_firstavailable_subrequests() -> None:
    sub = {"name": "big", "deviceClassName": "x"}
    CLAIMS.apply_defaults(
        {"spec": {"devices": {"requests": [{"name": "a", "firstAvailable": [sub]}]}}}
    )
    assert sub["allocationMode"] == "ExactCount" and sub["count"] == 1


def test_it_defaults_a_template_claim_spec() -> None:
    template = {"spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {}}]}}}}
    kind_for("resource.k8s.io", "resourceclaimtemplates").apply_defaults(template)
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1


def test_it_defaults_pods_like_the_api_server() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    kind_for("", "pods").apply_defaults(pod)
    assert pod["spec"]["restartPolicy"] == "Always"
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_it_admits_pods_with_the_default_service_account_and_not_ready_tolerations() -> None:
    mine = {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}
    spec = {"containers": [{"name": "c", "image": "busybox"}], "tolerations": [mine]}
    pod = {"metadata": {"name": "p"}, "spec": spec}
    kind_for("", "pods").apply_defaults(pod)
    assert pod["spec"]["serviceAccountName"] == "default"
    assert pod["spec"]["tolerations"] == [
        mine,
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]


def test_it_defaults_a_namespace_with_its_name_label() -> None:
    namespace = {"metadata": {"name": "dra-test"}}
    kind_for("", "namespaces").apply_defaults(namespace)
    assert namespace["metadata"]["labels"] == {"kubernetes.io/metadata.name": "dra-test"}
    assert namespace["spec"] == {"finalizers": ["kubernetes"]}
    assert namespace["status"] == {"phase": "Active"}


def test_it_renders_field_errors_like_apimachinery() -> None:
    required = FieldError("Required value", "spec.containers")
    invalid = FieldError(
        "Invalid value", "spec.devices.requests[0].exactly.count", -1, "must be greater than zero"
    )
    unsupported = FieldError(
        "Unsupported value",
        "spec.restartPolicy",
        "Sometimes",
        'supported values: "Always", "OnFailure", "Never"',
    )
    assert required.message() == "spec.containers: Required value"
    assert (
        invalid.message()
        == "spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero"
    )
    assert unsupported.message() == (
        'spec.restartPolicy: Unsupported value: "Sometimes": '
        'supported values: "Always", "OnFailure", "Never"'
    )
    assert [required.reason(), invalid.reason(), unsupported.reason()] == [
        "FieldValueRequired",
        "FieldValueInvalid",
        "FieldValueNotSupported",
    ]
    assert invalid.cause() == {
        "reason": "FieldValueInvalid",
        "message": "Invalid value: -1: must be greater than zero",
        "field": "spec.devices.requests[0].exactly.count",
    }


def test_it_renders_other_error_types() -> None:
    assert FieldError("Duplicate value", "x", "gpu").message() == 'x: Duplicate value: "gpu"'
    assert FieldError("Not found", "x", "gpu").reason() == "FieldValueNotFound"
    assert FieldError("Forbidden", "x", "v", "no").message() == "x: Forbidden: no"
    assert FieldError("Too many", "x", 33, "must have at most 32 items").message() == (
        "x: Too many: 33: must have at most 32 items"
    )
    assert FieldError("Invalid value", "x", OMIT, "bad").message() == "x: Invalid value: bad"


def test_it_joins_several_errors_in_the_invalid_message() -> None:
    errors = [FieldError("Required value", "a"), FieldError("Required value", "b")]
    assert invalid_message("ResourceClaim", "resource.k8s.io", "c", errors[:1]) == (
        'ResourceClaim.resource.k8s.io "c" is invalid: a: Required value'
    )
    assert (
        invalid_message("Pod", "", "p", errors)
        == 'Pod "p" is invalid: [a: Required value, b: Required value]'
    )
