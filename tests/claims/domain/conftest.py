"""Fixtures the domain's tests share."""

import pytest
from django.contrib.auth.models import User

from claims.models import ClaimRequest, Cluster, NamespaceRequest


@pytest.fixture
def claim(alice: User, db: None) -> ClaimRequest:
    """A claim in the cluster, not in use (its namespace active), with no runs."""
    cluster = Cluster.objects.create(name="lab")
    ns = NamespaceRequest.objects.create(
        owner=alice, cluster=cluster, name="team-a", state="active"
    )
    return ClaimRequest.objects.create(
        owner=alice,
        namespace_request=ns,
        name="train",
        device_class="gpu.nvidia.com",
        count=1,
        state="waiting",
    )
