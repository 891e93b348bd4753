"""Every name the portal makes is a DNS-1123 label, stable, and unique per input."""

from hypothesis import given
from hypothesis import strategies as st

from claims.kube import names
from claims.policy.validation import dns_label_problem

any_text = st.text(max_size=300)
run_ids = st.integers(min_value=1, max_value=10**12)


@given(any_text)
def test_it_always_makes_a_dns_label(text: str) -> None:
    made = names.label(text)
    assert names.is_dns_label(made)
    assert dns_label_problem(made) is None


@given(any_text)
def test_it_is_stable(text: str) -> None:
    assert names.label(text) == names.label(text)


@given(any_text, any_text)
def test_it_never_gives_two_inputs_one_name(a: str, b: str) -> None:
    if a != b:
        assert names.label(a) != names.label(b)


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True))
def test_it_keeps_a_name_that_is_already_a_label(text: str) -> None:
    assert names.label(text) == text


@given(any_text, run_ids)
def test_it_names_every_run_pod_validly_with_the_run_at_the_end(claim: str, run_id: int) -> None:
    pod = names.verification_pod_name(claim, run_id)
    assert names.is_dns_label(pod)
    assert pod.endswith(f"-verify-{run_id}")


@given(any_text, any_text, run_ids)
def test_it_gives_claims_sharing_a_long_prefix_different_pods(
    prefix: str, rest: str, run_id: int
) -> None:
    a, b = prefix * 3 + "a" + rest, prefix * 3 + "b" + rest
    assert names.verification_pod_name(a, run_id) != names.verification_pod_name(b, run_id)


def test_it_reproduces_the_40_character_collision_no_more() -> None:
    first = "a" * 40 + "-training"
    second = "a" * 40 + "-inference"
    assert names.verification_pod_name(first, 1) != names.verification_pod_name(second, 1)
    assert names.verification_pod_name("train", 7) == "train-verify-7"


@given(st.text(min_size=1, max_size=200))
def test_it_makes_valid_access_names_for_any_username(username: str) -> None:
    assert names.is_dns_label(names.access_service_account_name(username))
    assert names.is_dns_label(names.access_role_binding_name(username))


def test_it_names_alternatives_after_their_gpu_model_or_mig_profile() -> None:
    wanted = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "1g.10gb", ""]
    assert names.alternative_names(wanted) == ["h100", "a100", "mig-1g-10gb", "alt-4"]
    assert all(names.is_dns_label(name) for name in names.alternative_names(wanted))


def test_it_numbers_alternatives_whose_names_would_repeat() -> None:
    wanted = ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "Some GPU"]
    assert names.alternative_names(wanted) == ["a100", "alt-2", "alt-3"]
