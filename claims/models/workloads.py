"""What a data scientist runs on an approved claim: profiles an admin curates, and the batch
jobs and notebooks started from them (claims/domain/services/workloads.py)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from claims.kube import labels as label_keys
from claims.models.core import ClaimRequest, VerificationRun


class WorkloadKind(models.TextChoices):
    JOB = "job", pgettext_lazy("workload kind", "batch job")
    NOTEBOOK = "notebook", pgettext_lazy("workload kind", "notebook")


class WorkloadProfile(models.Model):
    """A kind of workload, with the image and the resources it starts with. Command and
    arguments are shell words (shlex); env maps names to values; ports are container ports."""

    name = models.CharField(_("Name"), max_length=100, unique=True)
    kind = models.CharField(_("Kind"), max_length=20, choices=WorkloadKind.choices)
    description = models.TextField(
        _("Description"), blank=True, help_text=_("What it is for, in a data scientist's words.")
    )
    image = models.CharField(_("Image"), max_length=500)
    command = models.TextField(
        _("Command"), blank=True, help_text=_("Shell words; empty: the image's entrypoint.")
    )
    args = models.TextField(_("Arguments"), blank=True, help_text=_("Shell words."))
    env = models.JSONField(_("Environment"), default=dict, blank=True)
    cpu_request = models.CharField(_("CPU request"), max_length=32, blank=True)
    cpu_limit = models.CharField(_("CPU limit"), max_length=32, blank=True)
    memory_request = models.CharField(_("Memory request"), max_length=32, blank=True)
    memory_limit = models.CharField(_("Memory limit"), max_length=32, blank=True)
    ports = models.JSONField(_("Ports"), default=list, blank=True)
    allow_any_image = models.BooleanField(
        _("Allow any image"),
        default=False,
        help_text=_("Users may run an image of their own; otherwise only the listed ones."),
    )
    # Image references, or prefixes ending in "*" ("nvcr.io/nvidia/*"); the profile's image
    # is always allowed.
    allowed_images = models.JSONField(_("Allowed images"), default=list, blank=True)
    # A job's activeDeadlineSeconds (never past its claim's end); null: until the claim ends.
    active_deadline_seconds = models.PositiveIntegerField(
        _("Deadline (seconds)"), null=True, blank=True
    )
    backoff_limit = models.PositiveSmallIntegerField(_("Retries of a failed job"), default=0)
    active = models.BooleanField(
        _("Offered"), default=True, help_text=_("Users may start new workloads from it.")
    )
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class KueueState(models.TextChoices):
    """Where Kueue's Workload for a Job is (its status conditions)."""

    PENDING = "pending", pgettext_lazy("kueue", "pending in Kueue")
    QUOTA_RESERVED = "quota_reserved", pgettext_lazy("kueue", "quota reserved by Kueue")
    ADMITTED = "admitted", pgettext_lazy("kueue", "admitted by Kueue")
    EVICTED = "evicted", pgettext_lazy("kueue", "evicted by Kueue")
    FINISHED = "finished", pgettext_lazy("kueue", "finished")


class Workload(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", pgettext_lazy("state", "pending")
        APPLYING = "applying", pgettext_lazy("state", "applying")
        STARTED = "started", pgettext_lazy("state", "started")
        RUNNING = "running", pgettext_lazy("state", "running")
        SUCCEEDED = "succeeded", pgettext_lazy("state", "succeeded")
        FAILED = "failed", pgettext_lazy("state", "failed")
        STOPPED = "stopped", pgettext_lazy("state", "stopped")

    FINAL_STATES = (State.SUCCEEDED, State.FAILED, State.STOPPED)
    Kind = WorkloadKind
    PodStage = VerificationRun.PodStage
    CONTAINER = "main"

    claim = models.ForeignKey(ClaimRequest, models.CASCADE, related_name="workloads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="+")
    # The profile it was started from; what it runs is copied below (an admin may change or
    # remove the profile later).
    profile = models.ForeignKey(
        WorkloadProfile, models.SET_NULL, null=True, blank=True, related_name="workloads"
    )
    profile_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=WorkloadKind.choices)
    # The name of its Job, or of its Pod, Service and Ingress: set once the row has an id.
    name = models.CharField(max_length=63, blank=True)
    image = models.CharField(max_length=500)
    command = models.TextField(blank=True)
    args = models.TextField(blank=True)
    env = models.JSONField(default=dict, blank=True)
    # {"requests": {"cpu": ..., "memory": ...}, "limits": {...}}
    resources = models.JSONField(default=dict, blank=True)
    ports = models.JSONField(default=list, blank=True)
    active_deadline_seconds = models.PositiveIntegerField(null=True, blank=True)
    backoff_limit = models.PositiveSmallIntegerField(default=0)
    # A notebook's access token (claims.clusters.credentials, Fernet): shown to its owner only.
    access_token_encrypted = models.TextField(blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    state_message = models.TextField(blank=True)
    # uid of the Job (a batch job) or of the Pod (a notebook) once created.
    kube_uid = models.CharField(max_length=64, blank=True)
    node = models.CharField(max_length=253, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Set once its objects are gone from the cluster (after a stop, or its claim's release).
    cleaned_up_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    cluster_waits = models.PositiveIntegerField(default=0)
    # Its Job was created suspended: its claim waits in the queue (claims/worker/queue_steps.py
    # resumes it in queue order).
    suspended = models.BooleanField(default=False)
    # The Pod followed: a notebook's, or the newest of a Job's (a retry makes another).
    pod_name = models.CharField(max_length=253, blank=True)
    # Where that Pod is (VerificationRun.PodStage); "" before it exists and once it ended.
    pod_stage = models.CharField(max_length=20, choices=PodStage.choices, blank=True)
    # The Pod's Events, newest first ([{"type", "reason", "message", "at", "count"}]), read by
    # the sync now and then (claims/worker/workload_steps.py).
    pod_events = models.JSONField(default=list, blank=True)
    pod_events_read_at = models.DateTimeField(null=True, blank=True)
    # What the Pod got of the claim (as VerificationRun.devices).
    devices = models.JSONField(default=list, blank=True)
    # The `main` container's exit code, from its terminated state.
    exit_code = models.SmallIntegerField(null=True, blank=True)
    # Why the last read of its log failed, in the cluster's words; "" once one works.
    log_error = models.TextField(blank=True)
    # On a cluster that runs Kueue (claims/worker/kueue_steps.py): the LocalQueue its Job was
    # submitted to ("" elsewhere), and what Kueue's Workload for it says: its state, message
    # and (where the visibility API is served) its position in that LocalQueue, from 1.
    kueue_queue = models.CharField(max_length=253, blank=True)
    kueue_state = models.CharField(max_length=20, choices=KueueState.choices, blank=True)
    kueue_message = models.TextField(blank=True)
    kueue_position = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        indexes = [
            models.Index(fields=["-created"], name="workload_newest"),
            models.Index(fields=["owner", "-created"], name="workload_owner_newest"),
            models.Index(fields=["state", "created"], name="workload_state_oldest"),
        ]

    def __str__(self) -> str:
        return self.name or f"workload {self.pk}"

    @property
    def is_final(self) -> bool:
        return self.state in self.FINAL_STATES

    @property
    def is_notebook(self) -> bool:
        return self.kind == WorkloadKind.NOTEBOOK

    @property
    def duration(self) -> timedelta | None:
        """How long its Pod ran (its container's start to its end), once it ended."""
        if self.started_at and self.finished_at:
            return max(self.finished_at - self.started_at, timedelta(0))
        return None

    def labels(self) -> dict[str, str]:
        return self.claim.labels() | {label_keys.WORKLOAD: str(self.pk)}


class WorkloadLog(models.Model):
    """The log of a workload's `main` container, as RunLog: the tail, bounded, read on. A Job
    that retries has a Pod per try: each one's lines follow the last's, under a header."""

    container = Workload.CONTAINER
    workload = models.OneToOneField(Workload, models.CASCADE, related_name="log")
    pod_name = models.CharField(max_length=253, blank=True)
    text = models.TextField(blank=True)
    truncated = models.BooleanField(default=False)
    last_timestamp = models.DateTimeField(null=True, blank=True)
    lines_at_last_timestamp = models.PositiveIntegerField(default=0)
    updated = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.workload_id}/{self.container}"
