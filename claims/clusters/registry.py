"""Clusters an admin registers on the Clusters page: a kubeconfig (its credentials encrypted
at rest by claims.clusters.credentials) or the portal's in-cluster service account, and the
first contact (discovery, preflight, inventory) in plain words.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.clusters.credentials import (
    Obj,
    _invalid,
    check_context,
    decrypt,
    encrypt,
    kubeconfig_of,
    parse_kubeconfig,
)
from claims.kube import permissions, preflight
from claims.kube.connection import load_configuration
from claims.kube.gateway import (
    ClusterGateway,
    ClusterInfo,
    KubeError,
    PermanentKubeError,
    PreflightCheck,
)
from claims.models import ClaimRequest, Cluster, NamespaceRequest
from claims.policy import metrics_scope
from claims.read import inventory, timewords

IN_CLUSTER = "in_cluster"
KUBECONFIG = "kubeconfig"


def gateway_options(cluster: Cluster) -> Obj:
    """How claims.worker.cluster_steps builds this cluster's gateway."""
    return {
        "kubeconfig_path": (cluster.kubeconfig_path or None)
        if not cluster.kubeconfig_encrypted
        else None,
        "context": cluster.context or None,
        "in_cluster": cluster.in_cluster,
        "kubeconfig": kubeconfig_of(cluster),
        "service_account_dir": settings.KUBE_SERVICE_ACCOUNT_DIR,
    }


@dataclass(frozen=True)
class ClusterInput:
    name: str
    source: str  # KUBECONFIG or IN_CLUSTER
    kubeconfig_text: str = ""  # "" when editing: keep the stored one
    context: str = ""
    prometheus_url: str = ""  # "": PROMETHEUS_URL (claims/read/metrics_scope.py)
    prometheus_selector: str = ""


def _connection_fields(data: ClusterInput, cluster: Cluster | None) -> Obj:
    if data.source == IN_CLUSTER:
        return {
            "in_cluster": True,
            "kubeconfig_encrypted": "",
            "kubeconfig_path": "",
            "context": "",
        }
    if data.kubeconfig_text:
        kubeconfig = parse_kubeconfig(data.kubeconfig_text)
        text = data.kubeconfig_text
    elif cluster is not None and cluster.kubeconfig_encrypted:
        text = decrypt(cluster.kubeconfig_encrypted)
        kubeconfig = parse_kubeconfig(text)
    else:
        raise _invalid(_("Upload or paste a kubeconfig."))
    check_context(kubeconfig, data.context)
    try:  # as the gateway will: a CA or key that does not decode is said now
        load_configuration(None, data.context, False, kubeconfig=kubeconfig)
    except PermanentKubeError as error:
        raise _invalid(_("It cannot be used: %(problem)s") % {"problem": error.message}) from None
    fields = {"in_cluster": False, "kubeconfig_path": "", "context": data.context}
    return fields | {"kubeconfig_encrypted": encrypt(text)}


def _check_name(name: str, cluster: Cluster | None) -> None:
    taken = Cluster.objects.filter(name=name)
    if cluster is not None:
        taken = taken.exclude(pk=cluster.pk)
    if taken.exists():
        message = _("A cluster named %(name)r is already registered.") % {"name": name}
        raise ValidationError({"name": [message]})


def _metrics_fields(data: ClusterInput) -> Obj:
    url, selector = data.prometheus_url.strip(), data.prometheus_selector.strip()
    problems = {
        "prometheus_url": metrics_scope.url_problem(url),
        "prometheus_selector": metrics_scope.selector_problem(selector),
    }
    if any(problems.values()):
        raise ValidationError({key: [text] for key, text in problems.items() if text})
    return {"prometheus_url": url, "prometheus_selector": selector}


def save_cluster(data: ClusterInput, cluster: Cluster | None = None) -> Cluster:
    """Register a cluster (cluster=None) or change one; ValidationError by field."""
    _check_name(data.name, cluster)
    metrics = _metrics_fields(data)  # checked first: they need no contact
    fields = _connection_fields(data, cluster) | metrics
    with transaction.atomic():
        if cluster is None:
            cluster = Cluster.objects.create(name=data.name, **fields)
        else:
            for key, value in {"name": data.name, **fields}.items():
                setattr(cluster, key, value)
            cluster.save()
    return cluster


def live_requests(cluster: Cluster) -> int:
    namespaces = NamespaceRequest.objects.filter(cluster=cluster).exclude(
        state__in=NamespaceRequest.FINAL_STATES
    )
    # A released claim is live until its objects are gone from the cluster.
    live = ~Q(state__in=ClaimRequest.FINAL_STATES) | Q(cleaned_up_at=None, state="released")
    claims = ClaimRequest.objects.filter(live, namespace_request__cluster=cluster)
    return namespaces.count() + claims.count()


def past_requests(cluster: Cluster) -> int:
    return NamespaceRequest.objects.filter(cluster=cluster).count()


def remove_cluster(cluster: Cluster) -> None:
    """Forget a cluster with nothing live on it, and the records of its finished requests;
    refused (ValidationError) while a namespace or claim there is live."""
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
        live = live_requests(cluster)
        if live:
            raise ValidationError(
                _(
                    "%(name)s still has %(live)d live request(s): delete its namespaces and "
                    "release its claims first."
                )
                % {"name": cluster.name, "live": live}
            )
        NamespaceRequest.objects.filter(cluster=cluster).delete()
        cluster.delete()


@dataclass(frozen=True)
class Contact:
    problem: str  # "" when the cluster answered everything asked
    preflight: list[PreflightCheck]
    # It answered, but refused the portal's identity (401/403): `problem` says what.
    refused: bool = False
    missing: list[str] = field(default_factory=list)  # the needed permissions it lacks

    @property
    def reachable(self) -> bool:
        return not self.problem or self.refused


# The cluster answered and refused the identity: not an outage, and no retry will help
# until an admin changes the credentials or the RBAC.
REFUSED_STATUSES = (401, 403)


def is_refusal(error: KubeError) -> bool:
    return isinstance(error, PermanentKubeError) and error.status in REFUSED_STATUSES


def plain_words(error: KubeError | str) -> str:
    """What went wrong, for an admin, from the client's message."""
    text = error if isinstance(error, str) else error.message
    status = error.status if isinstance(error, PermanentKubeError) else None
    lowered = text.lower()
    rules = [
        (
            "certificate_verify_failed",
            "certificate not trusted (the cluster's CA is not the kubeconfig's)",
        ),
        ("hostname mismatch", "certificate does not match the server's address"),
        ("connection refused", "connection refused (nothing listens at the server's address)"),
        ("name or service not known", "the server's host name is not known"),
        ("timed out", "no answer in time (timed out)"),
    ]
    for needle, words in rules:
        if needle in lowered:
            return words
    if status == 401:
        return UNAUTHORISED
    if status == 403:
        return f"forbidden: the credentials may not do this ({text})"
    return text


# What a data scientist reads of a cluster that refuses the portal (no credentials' details).
NOT_USABLE_YET = gettext_noop(
    "The portal cannot use this cluster yet: it does not allow the portal all it needs. "
    "An admin sees what is missing on the cluster's page."
)
UNAUTHORISED = "unauthorised: the cluster did not accept the credentials"
MAY_NOT = "reachable, but the portal's identity may not: "


def refusal_words(error: PermanentKubeError, missing: list[permissions.Permission]) -> str:
    """An admin's words for a refusal: the permissions to grant when the cluster said."""
    if error.status == 401:
        return UNAUTHORISED
    if missing:
        return MAY_NOT + permissions.missing_words(missing)
    return f"reachable, but it refused the portal: {error.message}"


def ask_missing(gateway: ClusterGateway) -> list[permissions.Permission]:
    """The needed permissions the identity lacks; none known when it may not even ask."""
    try:
        return gateway.missing_permissions(settings.ACCESS_CLUSTER_ROLE)
    except KubeError:
        return []


def contact(cluster: Cluster) -> Contact:
    """Connect afresh, discover, run the preflight, read the inventory; record the outcome
    (on the row and on `cluster`). A cluster that answers but refuses the portal's identity
    is reachable: it says its version and which needed permissions the identity lacks."""
    try:
        with ClusterGateway(**gateway_options(cluster)) as gateway:
            try:
                checks_done = gateway.preflight()
                info = gateway.discover()
                built: Obj = {}
                if info.preferred_resource_version:
                    built = inventory.build_inventory(
                        gateway.list_device_classes(), gateway.list_devices()
                    )
            except PermanentKubeError as error:
                if not is_refusal(error):
                    raise
                return _refused(cluster, gateway, error)
    except KubeError as error:
        problem = plain_words(error)
        mark_unreachable(cluster.pk, problem)
        cluster.refresh_from_db()
        return Contact(problem, [])
    built["preflight"] = [dataclasses.asdict(check) for check in checks_done]
    Cluster.objects.filter(pk=cluster.pk).update(
        server_version=info.server_version,
        resource_versions=info.resource_versions,
        preferred_resource_version=info.preferred_resource_version or "",
        inventory=built,
        inventory_synced_at=timezone.now(),
    )
    mark_reachable(cluster.pk)
    cluster.refresh_from_db()
    return Contact("", checks_done)


def _refused(cluster: Cluster, gateway: ClusterGateway, error: PermanentKubeError) -> Contact:
    """/version and discovery are open to any authenticated identity (system:discovery,
    system:public-info-viewer): the version and the checks from discovery are known."""
    checks: list[PreflightCheck] = []
    try:
        info: ClusterInfo | None = gateway.discover()
    except KubeError:
        info = None
    if info is not None:
        checks = [
            preflight.check_server_version(info),
            preflight.check_dra_served(info),
            preflight.check_scheduler_dra(info),
        ]
        Cluster.objects.filter(pk=cluster.pk).update(
            server_version=info.server_version,
            resource_versions=info.resource_versions,
            preferred_resource_version=info.preferred_resource_version or "",
        )
    missing = ask_missing(gateway) if error.status == 403 else []
    problem = refusal_words(error, missing)
    mark_refused(cluster.pk, problem, [str(permission) for permission in missing])
    cluster.refresh_from_db()
    return Contact(problem, checks, refused=True, missing=cluster.missing_permissions)


def mark_refused(cluster_pk: int, problem: str, missing: list[str]) -> None:
    """It answers (so not unreachable), but refuses the portal's identity; `refused_since`
    keeps the first refusal."""
    now = Value(timezone.now(), output_field=DateTimeField())
    Cluster.objects.filter(pk=cluster_pk).update(
        last_error=problem,
        missing_permissions=missing,
        refused_since=Coalesce("refused_since", now),
        unreachable_since=None,
    )


# How the gateway's connection says the cluster did not answer (claims/kube/connection.py).
UNREACHABLE = "cannot reach the cluster"


def mark_unreachable(cluster_pk: int, problem: str) -> None:
    """Record the problem; `unreachable_since` keeps the first failure of the outage.

    One statement: as two, a loop's good pass that cleared both in between left the
    cluster unreachable with no word why."""
    now = Value(timezone.now(), output_field=DateTimeField())
    Cluster.objects.filter(pk=cluster_pk).update(
        last_error=problem, unreachable_since=Coalesce("unreachable_since", now)
    )


def record_problem(cluster_pk: int, problem: str) -> None:
    """What the last contact with the cluster could not do; one that did not reach it marks it
    unreachable, in an admin's words, at once (the client's raw message is never shown)."""
    if UNREACHABLE in problem:
        mark_unreachable(cluster_pk, plain_words(problem))
    else:
        Cluster.objects.filter(pk=cluster_pk).update(last_error=problem)


def mark_reachable(cluster_pk: int) -> None:
    """It answers what the portal asks: no outage, no refusal."""
    nothing_to_clear = Q(unreachable_since=None, refused_since=None, last_error="")
    Cluster.objects.filter(pk=cluster_pk).exclude(nothing_to_clear).update(
        unreachable_since=None, refused_since=None, missing_permissions=[], last_error=""
    )


def record_good_sync(cluster: Cluster, now: datetime) -> None:
    """A sync pass without problems. It may have asked the cluster nothing (a loop's pass
    reads its caches; a sync with nothing to follow lists nothing), so it says nothing of
    whether the cluster answers: a cluster marked unreachable stays so, with its reason, until
    an inventory read since the outage began (as note_sync_outcome says too), the loop or
    a check finds it answers."""
    answered = Q(unreachable_since__isnull=True) | Q(
        inventory_synced_at__gte=F("unreachable_since")
    )
    rows = Cluster.objects.filter(answered, pk=cluster.pk)
    if rows.update(last_synced_at=now, last_error="", unreachable_since=None):
        cluster.last_synced_at, cluster.last_error, cluster.unreachable_since = now, "", None


def note_sync_outcome(cluster_pk: int) -> None:
    """After a one-off sync (a problem was recorded by record_problem, unreachable included):
    whether the cluster answers again."""
    cluster = Cluster.objects.filter(pk=cluster_pk).first()
    if cluster is None:
        return
    # A sync with nothing to follow asks the cluster nothing: only the inventory it read
    # since the outage began says the cluster answers again.
    since, read = cluster.unreachable_since, cluster.inventory_synced_at
    if since and not cluster.last_error and read and read >= since:
        mark_reachable(cluster_pk)


def status_label(cluster: Cluster, now: datetime | None = None) -> str:
    """The status in words, e.g. "unreachable since 2026-12-01 10:42 UTC, 5 minutes ago"."""
    since = cluster.unreachable_since
    if since is None:
        return _("cannot be used yet") if cluster.refused_since else ""
    at = since.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return _("unreachable since %(at)s, %(ago)s") % {"at": at, "ago": timewords.ago(since, now)}


def the_only_cluster() -> Cluster:
    """The cluster a request goes to when it names none: the only one there is."""
    clusters = list(Cluster.objects.all()[:2])
    if len(clusters) != 1:
        if clusters:
            message = _("Name a cluster: the portal has more than one cluster.")
        else:
            message = _("Name a cluster: the portal has no cluster.")
        raise ValidationError({"cluster": [message]})
    return clusters[0]


def picker_label(cluster: Cluster) -> str:
    """A cluster in the namespace form's picker."""
    status = status_label(cluster)
    return f"{cluster.name} ({status})" if status else cluster.name
