"""The cluster page and a run's page read in Hebrew: preflight checks translated where they are
shown, Latin values kept apart from the right-to-left text around them, and no English
phrase left but program output and the names of things."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone, translation

from claims.models import ClaimRequest, Cluster, Profile, VerificationRun
from claims.web.views.clusters import preflight_from_sync
from tests.claims.web import test_views_claims
from tests.claims.web.test_i18n import LATIN_WORDS
from tests.claims.web.test_views import *  # noqa: F403 (shared fixtures)
from tests.claims.web.test_views import client_for
from tests.claims.web.test_views_claims import finish

applied = test_views_claims.applied
run = test_views_claims.run

# U+2068 FIRST STRONG ISOLATE ... U+2069 POP DIRECTIONAL ISOLATE: <bdi> in plain text.
ISOLATED = re.compile("\u2068[^\u2069]*\u2069")
PROGRAM_TEXT = re.compile(r"<(code|pre|samp|script|style|bdi)\b.*?</\1>", re.S)
TAGS = re.compile(r"<[^>]*>")
# Terms the Hebrew pages keep in Latin letters (as "בקשת GPU claim").
KEPT_IN_HEBREW = frozenset({"claim", "NVIDIA"})


@pytest.fixture(autouse=True)
def back_to_english() -> Iterator[None]:
    yield
    translation.deactivate()


def page_in_hebrew(user: User, url: str) -> str:
    Profile.objects.update_or_create(user=user, defaults={"language": "he"})
    content = client_for(user).get(url).content.decode()
    return content[content.index("<main") :]


def preflight_rows(page: str) -> list[str]:
    table = page[page.index("<h2>בדיקות מקדימות</h2>") : page.index("</table>")]
    return re.findall(r"<tr>(.*?)</tr>", table, re.S)


def english_words(html: str, *values: str) -> list[str]:
    """The Latin words a reader sees outside program text, isolated values and the names
    given (a node, a claim, a GPU model...)."""
    text = TAGS.sub(" ", ISOLATED.sub(" ", PROGRAM_TEXT.sub(" ", html)))
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, " ")
    words = re.findall(r"[A-Za-z][A-Za-z'-]+", text)
    return [word for word in words if word not in LATIN_WORDS | KEPT_IN_HEBREW]


def test_it_shows_the_preflight_checks_in_hebrew(cluster: Cluster, bob: User) -> None:
    page = page_in_hebrew(bob, reverse("cluster", args=[cluster.pk]))
    rows = preflight_rows(page)
    assert len(rows) == 5
    assert english_words("".join(rows), "v1.34.1", "v1beta2", "v1beta1", "gpu-node-1") == []
    assert "גרסת Kubernetes" in page


def test_it_shows_a_failing_preflight_in_hebrew(cluster: Cluster, bob: User) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(
        server_version="v1.31.4", resource_versions=[], preferred_resource_version=""
    )
    rows = preflight_rows(page_in_hebrew(bob, reverse("cluster", args=[cluster.pk])))
    assert len(rows) == 5
    assert english_words("".join(rows), "v1.31.4") == []


def test_it_keeps_the_latin_values_of_a_preflight_line_apart(cluster: Cluster, bob: User) -> None:
    """ "2 devices published by gpu.nvidia.com" read right to left must not come out as
    "devices published by 2 gpu.nvidia.com": the driver's name is isolated."""
    rows = preflight_rows(page_in_hebrew(bob, reverse("cluster", args=[cluster.pk])))
    driver = next(row for row in rows if "דרייבר" in row)
    assert "\u2068gpu.nvidia.com\u2069" in driver
    # Each detail takes its direction from its own first letter (Hebrew, or a list of names).
    assert all(re.search(r'<td class="muted"><bdi>.*</bdi></td>', row) for row in rows)


def test_it_keeps_the_preflight_in_english_where_it_is_kept(cluster: Cluster) -> None:
    """What the portal stores and the API answers stays English, whoever reads it."""
    with translation.override("he"):
        details = [check.detail for check in preflight_from_sync(cluster)]
    assert "2 devices published by gpu.nvidia.com" in details


def test_it_isolates_the_names_on_the_cluster_page(cluster: Cluster, bob: User) -> None:
    lost = timezone.now()
    Cluster.objects.filter(pk=cluster.pk).update(
        last_error="connection refused", unreachable_since=lost
    )
    page = page_in_hebrew(bob, reverse("cluster", args=[cluster.pk]))
    assert "אשכול <bdi>kubesim</bdi>" in page
    # Not "connection refused." turned into ".connection refused" at the end of the line.
    assert ": <bdi>connection refused</bdi>." in page


def test_it_words_the_run_page_in_hebrew(run: VerificationRun) -> None:
    finish(run)
    page = page_in_hebrew(run.owner, reverse("run", args=[run.pk]))
    names = (run.pod_name, run.claim.name, run.claim.namespace_request.name, "kubesim")
    assert english_words(page, *names, "gpu-node-1", "gpu-0", "NVIDIA H100 80GB HBM3") == []


def test_it_isolates_the_values_on_the_run_page(run: VerificationRun) -> None:
    finish(run)
    page = page_in_hebrew(run.owner, reverse("run", args=[run.pk]))
    assert "<bdi>81090 MiB</bdi>" in page
    assert "<bdi><strong>gpu-node-1</strong></bdi>" in page
    assert "<bdi>gpu.nvidia.com</bdi>" in page


@pytest.mark.parametrize(
    ("count", "all_devices", "said"),
    [
        (None, False, "Checks that the GPU of claim"),
        (1, False, "Checks that the GPU of claim"),
        (4, False, "Checks that the 4 GPUs of claim"),
        (None, True, "Checks that the GPUs of claim"),
    ],
)
def test_it_says_how_many_gpus_a_run_checks(
    run: VerificationRun, count: int | None, all_devices: bool, said: str
) -> None:
    ClaimRequest.objects.filter(pk=run.claim.pk).update(count=count, all_devices=all_devices)
    page = client_for(run.owner).get(reverse("run", args=[run.pk])).content.decode()
    lead = re.search(r'<p class="lead"[^>]*>(.*?)</p>', page, re.S)
    assert lead and said in lead[1]
    several = all_devices or (count or 1) > 1
    assert ("the same GPU" in lead[1]) is not several


def test_it_says_how_many_gpus_a_run_checks_in_hebrew(run: VerificationRun) -> None:
    ClaimRequest.objects.filter(pk=run.claim.pk).update(count=4)
    page = page_in_hebrew(run.owner, reverse("run", args=[run.pk]))
    lead = re.search(r'<p class="lead"[^>]*>(.*?)</p>', page, re.S)
    assert lead and "4 ה-GPU" in lead[1]
    assert "אותו GPU" not in lead[1]
