"""What users asked for (the database is its truth) and what the cluster last told us."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import pgettext_lazy

from claims.kube import labels as label_keys


class Cluster(models.Model):
    name = models.CharField(max_length=100, unique=True)
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    # An uploaded kubeconfig, Fernet-encrypted (claims/clusters/credentials.py); never plaintext.
    kubeconfig_encrypted = models.TextField(blank=True)
    in_cluster = models.BooleanField(default=False)
    context = models.CharField(max_length=200, blank=True)
    simulated = models.BooleanField(default=False)
    server_version = models.CharField(max_length=50, blank=True)
    resource_versions = models.JSONField(default=list, blank=True)
    preferred_resource_version = models.CharField(max_length=20, blank=True)
    # Discovery found Kueue (kueue.x-k8s.io): the portal's queue stands back for it; and
    # its visibility API (pending workloads' positions).
    kueue = models.BooleanField(default=False)
    kueue_visibility = models.BooleanField(default=False)
    # {"device_classes": [{"name", "selectors"}], "devices": [{"node", "driver", "pool",
    #  "name", "attributes", "capacity"}], "device_counts": {"<class>": n}}
    inventory = models.JSONField(default=dict, blank=True)
    inventory_synced_at = models.DateTimeField(null=True, blank=True)
    last_synced_at = models.DateTimeField(null=True, blank=True)
    # The cluster's one lease (claims/worker/lease.py): the loop that watches this cluster
    # (claims/worker/cluster_loop.py) and until when; a second copy waits and takes over
    # when this one dies.
    follower = models.CharField(max_length=200, blank=True)
    follower_lease_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # Set at the first failed contact after a good one, cleared by the next good one.
    unreachable_since = models.DateTimeField(null=True, blank=True)
    # The cluster answers but refuses the portal's identity (401/403) what it needs, since
    # when; the needed permissions it lacks, as "list resourceslices.resource.k8s.io".
    refused_since = models.DateTimeField(null=True, blank=True)
    missing_permissions = models.JSONField(default=list, blank=True)
    # Name of a docker-registry Secret in each namespace, for clusters pulling from a
    # private mirror (air-gapped); the portal references it, it does not create it.
    image_pull_secret = models.CharField(max_length=253, blank=True)
    # The Prometheus that scrapes this cluster's dcgm-exporters ("": PROMETHEUS_URL), and the
    # label matchers that select this cluster's series in it ("": by the cluster's node
    # names when that Prometheus serves other clusters too); claims/read/metrics_scope.py.
    prometheus_url = models.CharField(max_length=500, blank=True)
    prometheus_selector = models.CharField(max_length=500, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_followed(self) -> bool:
        """A live loop (claims/worker/cluster_loop.py) watches this cluster."""
        until = self.follower_lease_until
        return until is not None and until >= timezone.now()

    def device_class_names(self) -> list[str]:
        return [dc["name"] for dc in self.inventory.get("device_classes", [])]

    def device_count(self, device_class: str) -> int:
        return int(self.inventory.get("device_counts", {}).get(device_class, 0))


MANAGED_BY = label_keys.MANAGED_BY
INSTANCE_LABEL = label_keys.INSTANCE


def managed_labels() -> dict[str, str]:
    """The labels on everything this portal installation creates (two installations sharing
    a cluster, e.g. staging and production, never take each other's objects)."""
    return MANAGED_BY | {INSTANCE_LABEL: settings.PORTAL_INSTANCE}


def managed_selector() -> str:
    return ",".join(f"{key}={value}" for key, value in managed_labels().items())


def outside_selector() -> str:
    """Objects this installation did not make: `!=` also matches objects without the label
    (other teams' claims), and another installation's objects are outside this one."""
    return f"{INSTANCE_LABEL}!={settings.PORTAL_INSTANCE}"


class Request(models.Model):
    """What a namespace request and a claim request share: who asked, why, who decided."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    purpose = models.TextField(blank=True)
    state_message = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)
    # When a task has a retry scheduled: the reconciler leaves the row alone until then.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Rounds of waiting for an unreachable cluster since the last state change (back-off).
    cluster_waits = models.PositiveIntegerField(default=0)
    # Why the server dry-run at submit could not run (cluster unreachable...); "" when it did.
    dry_run_note = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["-created"]


def list_indexes(prefix: str) -> list[models.Index]:
    """The orders and filters of the lists: newest first (everyone's and one owner's), the
    approval queue's oldest pending first, and the ?name= filter."""
    return [
        models.Index(fields=["-created"], name=f"{prefix}_newest"),
        models.Index(fields=["owner", "-created"], name=f"{prefix}_owner_newest"),
        models.Index(fields=["state", "created"], name=f"{prefix}_state_oldest"),
        models.Index(fields=["name"], name=f"{prefix}_name"),
    ]


class NamespaceRequest(Request):
    class State(models.TextChoices):
        PENDING = "pending", pgettext_lazy("state", "pending")
        APPROVED = "approved", pgettext_lazy("state", "approved")
        ACTIVE = "active", pgettext_lazy("state", "active")
        REJECTED = "rejected", pgettext_lazy("state", "rejected")
        FAILED = "failed", pgettext_lazy("state", "failed")
        DELETING = "deleting", pgettext_lazy("state", "deleting")
        DELETED = "deleted", pgettext_lazy("state", "deleted")

    FINAL_STATES = (State.REJECTED, State.DELETED)

    cluster = models.ForeignKey(Cluster, models.PROTECT, related_name="namespace_requests")
    name = models.CharField(max_length=63)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    # uid of the Namespace this request created (or adopted): deletes are preconditioned on it.
    kube_uid = models.CharField(max_length=64, blank=True)
    access_granted_at = models.DateTimeField(null=True, blank=True)

    class Meta(Request.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"],
                condition=~Q(state__in=["rejected", "deleted"]),
                name="unique_live_namespace_per_cluster",
            )
        ]
        indexes = list_indexes("nsreq")

    def __str__(self) -> str:
        return f"{self.name} on {self.cluster_id}"

    def labels(self) -> dict[str, str]:
        return managed_labels() | {label_keys.NAMESPACE_REQUEST: str(self.pk)}


class ClaimRequest(Request):
    class State(models.TextChoices):
        PENDING = "pending", pgettext_lazy("state", "pending")
        APPROVED = "approved", pgettext_lazy("state", "approved")
        APPLYING = "applying", pgettext_lazy("state", "applying")
        WAITING = "waiting", pgettext_lazy("state", "waiting")
        IN_USE = "in_use", pgettext_lazy("state", "in use")
        RELEASED = "released", pgettext_lazy("state", "released")
        REJECTED = "rejected", pgettext_lazy("state", "rejected")
        FAILED = "failed", pgettext_lazy("state", "failed")

    FINAL_STATES = (State.RELEASED, State.REJECTED)

    namespace_request = models.ForeignKey(
        NamespaceRequest, models.PROTECT, related_name="claim_requests"
    )
    name = models.CharField(max_length=63)
    device_class = models.CharField(max_length=253)
    count = models.PositiveIntegerField(null=True, blank=True)
    all_devices = models.BooleanField(default=False)
    selector = models.TextField(blank=True)
    # The device picker's choices (claims.policy.device_picker); `selector` holds the CEL they make.
    gpu_model = models.CharField(max_length=64, blank=True)
    min_memory = models.CharField(max_length=32, blank=True)
    mig_profile = models.CharField(max_length=64, blank=True)
    # DRA's prioritized list: what else would do when no device fits the fields above, in
    # order, up to 7 more: [{"device_class", "gpu_model", "min_memory", "mig_profile",
    # "count", "all_devices", "selector"}] (the selector is the CEL they make, as above).
    further_alternatives = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    applied_api_version = models.CharField(max_length=50, blank=True)
    applied_manifest = models.JSONField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    kube_uid = models.CharField(max_length=64, blank=True)
    # Current allocation as last seen: {"node", "devices": [{"request", "driver", "pool",
    # "device", "attributes", "capacity"}], "reserved_for": [...]}; None when unallocated.
    allocation = models.JSONField(null=True, blank=True)
    # Since when it holds the devices of `allocation` (reset when they change): the span of
    # their metrics that is this claim's (claims/read/claim_devices.py).
    allocated_at = models.DateTimeField(null=True, blank=True)
    node = models.CharField(max_length=253, blank=True)
    # Set once the cluster objects of a released claim are gone.
    cleaned_up_at = models.DateTimeField(null=True, blank=True)
    # Its lifetime (claims/domain/expiry.py): the clock starts when the ResourceClaim is created;
    # extensions lengthen it. The portal reclaims the claim at expires_at.
    lifetime = models.DurationField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    # Its place among claims waiting for the same devices (claims/read/queue.py): higher goes
    # first, then the oldest; an approver moves a claim up or down.
    queue_priority = models.IntegerField(default=0)

    class Meta(Request.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_request", "name"],
                condition=~Q(state__in=["rejected", "released"]),
                name="unique_live_claim_per_namespace",
            )
        ]
        indexes = [
            *list_indexes("claimreq"),
            models.Index(fields=["state", "device_class"], name="claimreq_state_class"),
            models.Index(fields=["expires_at"], name="claimreq_expires"),
            # The few claims holding devices, for what is free (feasibility.allocated_on):
            # without it each approval queue page read every claim ever made.
            models.Index(
                fields=["namespace_request"],
                condition=Q(allocation__isnull=False),
                name="claimreq_allocated",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def cluster(self) -> Cluster:
        return self.namespace_request.cluster

    @property
    def namespace(self) -> str:
        return self.namespace_request.name

    def labels(self) -> dict[str, str]:
        return managed_labels() | {
            label_keys.NAMESPACE_REQUEST: str(self.namespace_request_id),
            label_keys.CLAIM_REQUEST: str(self.pk),
        }

    def alternatives(self) -> list[dict[str, Any]]:
        """What the claim would take, in order of preference: its own fields first."""
        first = {
            "device_class": self.device_class,
            "gpu_model": self.gpu_model,
            "min_memory": self.min_memory,
            "mig_profile": self.mig_profile,
            "count": self.count,
            "all_devices": self.all_devices,
            "selector": self.selector,
        }
        return [first, *(self.further_alternatives or [])]

    @property
    def allocated_alternative(self) -> str:
        """The alternative the scheduler took, as the allocation names it (`gpu/a100`);
        "" when unallocated or the claim has one alternative."""
        return allocated_alternative((self.allocation or {}).get("devices") or [])


def allocated_alternative(devices: list[dict[str, Any]]) -> str:
    """`<request>/<subrequest>` of the allocation results (status.allocation.devices.results[]
    .request), the name of the prioritized list's entry that got the devices."""
    return next((d["request"] for d in devices if "/" in (d.get("request") or "")), "")


class VerificationRun(models.Model):
    class PodStage(models.TextChoices):
        """Where a run's Pod is between created and ended (its phase alone says Pending for all
        but the last): from the Pod's node and container states and the kubelet's Events."""

        SCHEDULING = "scheduling", pgettext_lazy("pod stage", "waiting to be scheduled")
        BOUND = "bound", pgettext_lazy("pod stage", "bound to a node")
        PULLING = "pulling", pgettext_lazy("pod stage", "pulling the image")
        STARTING = "starting", pgettext_lazy("pod stage", "starting the containers")
        IMAGE_PULL_FAILED = (
            "image_pull_failed",
            pgettext_lazy("pod stage", "image cannot be pulled"),
        )
        RUNNING = "running", pgettext_lazy("pod stage", "running")

    class State(models.TextChoices):
        QUEUED = "queued", pgettext_lazy("state", "queued")
        CREATING = "creating", pgettext_lazy("state", "creating")
        PENDING = "pending", pgettext_lazy("state", "pending")
        RUNNING = "running", pgettext_lazy("state", "running")
        SUCCEEDED = "succeeded", pgettext_lazy("state", "succeeded")
        FAILED = "failed", pgettext_lazy("state", "failed")

    FINAL_STATES = (State.SUCCEEDED, State.FAILED)
    CONTAINERS = ("ctr0", "ctr1")

    claim = models.ForeignKey(ClaimRequest, models.CASCADE, related_name="runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    pod_name = models.CharField(max_length=63, blank=True)
    pod_uid = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    state_message = models.TextField(blank=True)
    node = models.CharField(max_length=253, blank=True)
    # What this run got: [{"request", "driver", "pool", "device", "attributes", "capacity"}]
    devices = models.JSONField(default=list, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    vector_add_passed = models.BooleanField(null=True, blank=True)
    device_query_passed = models.BooleanField(null=True, blank=True)
    device_name = models.CharField(max_length=200, blank=True)
    compute_capability = models.CharField(max_length=20, blank=True)
    memory_mib = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    cluster_waits = models.PositiveIntegerField(default=0)
    # Why the last read of the Pod's logs failed, in the cluster's words; "" once one works.
    log_error = models.TextField(blank=True)
    # A finished run whose logs could not be read is read again until then.
    log_retry_until = models.DateTimeField(null=True, blank=True)
    # Failed log reads in a row, and when the next may be tried: a kubelet the API server
    # cannot reach is asked again less and less often (run_observations.run_log_read).
    log_attempts = models.PositiveSmallIntegerField(default=0)
    next_log_read_at = models.DateTimeField(null=True, blank=True)
    # While its Pod is pending: the latest Warning Events about it, newest first
    # ([{"reason", "message", "at", "count"}]), read by the sync now and then
    # (claims/worker/sync.py).
    pod_warnings = models.JSONField(default=list, blank=True)
    pod_warnings_read_at = models.DateTimeField(null=True, blank=True)
    # Read with them: the kubelet's latest word on the bound Pod's containers, a Normal Event
    # ({"reason": "Pulling", "message": 'Pulling image "..."'}), which says the image pulls.
    pod_activity = models.JSONField(default=dict, blank=True)
    # What the Pod is doing while the run waits or runs (PodStage); "" with no Pod or once
    # it ended.
    pod_stage = models.CharField(max_length=20, choices=PodStage.choices, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            models.Index(fields=["-created"], name="run_newest"),
            models.Index(fields=["owner", "-created"], name="run_owner_newest"),
            models.Index(fields=["state", "created"], name="run_state_oldest"),
        ]

    def __str__(self) -> str:
        return self.pod_name or f"run {self.pk}"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    def labels(self) -> dict[str, str]:
        return self.claim.labels() | {label_keys.VERIFICATION_RUN: str(self.pk)}

    @property
    def allocated_alternative(self) -> str:
        return allocated_alternative(self.devices or [])


class RunLog(models.Model):
    """The log of one container of a run: the tail, bounded, fetched incrementally."""

    run = models.ForeignKey(VerificationRun, models.CASCADE, related_name="logs")
    container = models.CharField(max_length=63)
    text = models.TextField(blank=True)
    truncated = models.BooleanField(default=False)
    # Timestamp of the last line kept, and how many lines with that timestamp were kept: the
    # next fetch starts at that timestamp and skips exactly those (lines may share one).
    last_timestamp = models.DateTimeField(null=True, blank=True)
    lines_at_last_timestamp = models.PositiveIntegerField(default=0)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["container"]
        constraints = [
            models.UniqueConstraint(fields=["run", "container"], name="unique_log_per_container")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}/{self.container}"
