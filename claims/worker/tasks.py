"""Thin Celery tasks: load the row by id, do one step, retry only transient cluster errors.

A task whose row is gone returns quietly; every task is safe to run twice (the step checks
the row's state and the cluster side is server-side apply with deterministic names). A
cluster that stays unreachable past the retry budget fails nothing: the row waits, says so,
and the reconciler tries again with a capped exponential back-off (only a refusal is final).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from celery import Task, shared_task
from django.conf import settings
from django.db.models import Model
from django.utils import timezone
from knox.models import AuthToken

from claims.domain import access, expiry, idle_reclaim, observations
from claims.kube.gateway import TransientKubeError
from claims.models import (
    ClaimRequest,
    NamespaceRequest,
    VerificationRun,
    WebhookDelivery,
    Workload,
)
from claims.notify import notifications, webhooks
from claims.worker import cluster_steps, reconciler, workload_steps

log = logging.getLogger(__name__)

MAX_RETRIES = settings.KUBE_TASK_MAX_RETRIES
MAX_BACKOFF_SECONDS = settings.KUBE_TASK_MAX_BACKOFF_SECONDS


def backoff(retries: int) -> int:
    return min(2**retries, MAX_BACKOFF_SECONDS)


def _step(task: Task, row: Model, step: Callable[[], object]) -> None:
    try:
        step()
    except TransientKubeError as error:
        if task.request.retries >= MAX_RETRIES:
            log.warning("%s: the cluster did not answer; waiting: %s", task.name, error)
            observations.waiting_for_cluster(row, message=error.message)
            return
        countdown = backoff(task.request.retries)
        _retry_scheduled(row, countdown)
        raise task.retry(exc=error, countdown=countdown) from None


def _retry_scheduled(row: Model, countdown: float) -> None:
    """Tell the reconciler a retry is on its way, so it does not send a second one."""
    at = timezone.now() + timedelta(seconds=countdown + settings.RECONCILE_STALE_SECONDS)
    type(row)._default_manager.filter(pk=row.pk).update(next_attempt_at=at)


def _namespace(namespace_request_id: int) -> NamespaceRequest | None:
    related = NamespaceRequest.objects.select_related("cluster")
    return related.filter(pk=namespace_request_id).first()


@shared_task(bind=True, max_retries=None)
def apply_namespace(self: Task, namespace_request_id: int) -> None:
    ns = _namespace(namespace_request_id)
    if ns is None:
        return
    _step(self, ns, lambda: cluster_steps.apply_namespace(ns))


@shared_task(bind=True, max_retries=None)
def apply_namespace_quota(self: Task, namespace_request_id: int) -> None:
    """Put the team's changed quotas on an active namespace's ResourceQuota."""
    ns = _namespace(namespace_request_id)
    if ns is None or ns.state != NamespaceRequest.State.ACTIVE:
        return
    _step(self, ns, lambda: cluster_steps.apply_namespace_quota(ns))


def _claim(claim_request_id: int) -> ClaimRequest | None:
    related = ClaimRequest.objects.select_related("namespace_request__cluster")
    return related.filter(pk=claim_request_id).first()


@shared_task(bind=True, max_retries=None)
def apply_claim(self: Task, claim_request_id: int) -> None:
    claim = _claim(claim_request_id)
    if claim is None:
        return
    _step(self, claim, lambda: cluster_steps.apply_claim(claim))


@shared_task(bind=True, max_retries=None)
def delete_claim(self: Task, claim_request_id: int) -> None:
    claim = _claim(claim_request_id)
    if claim is not None:
        # Giving up leaves the row for the reconciler to try again later.
        _step(self, claim, lambda: cluster_steps.delete_claim(claim))


@shared_task(bind=True, max_retries=None)
def delete_namespace(self: Task, namespace_request_id: int) -> None:
    ns = _namespace(namespace_request_id)
    if ns is not None:
        _step(self, ns, lambda: cluster_steps.delete_namespace(ns))


@shared_task(bind=True, max_retries=None)
def grant_namespace_access(self: Task, namespace_request_id: int) -> None:
    ns = _namespace(namespace_request_id)
    if ns is not None:
        # Giving up leaves the row for the reconciler (access_granted_at stays empty).
        _step(self, ns, lambda: access.grant_access(ns))


def _run(run_id: int) -> VerificationRun | None:
    related = VerificationRun.objects.select_related("claim__namespace_request__cluster")
    return related.filter(pk=run_id).first()


@shared_task(bind=True, max_retries=None)
def start_verification_run(self: Task, run_id: int, resume: bool = False) -> None:
    """resume: carry on creating a run's Pod that an earlier attempt began."""
    run = _run(run_id)
    if run is None:
        return
    resume = resume or self.request.retries > 0
    _step(self, run, lambda: cluster_steps.start_run(run, resume=resume))


@shared_task(bind=True, max_retries=None)
def delete_run_pod(self: Task, run_id: int) -> None:
    run = _run(run_id)
    if run is not None:
        # Giving up leaves the Pod to end by itself (restartPolicy Never).
        _step(self, run, lambda: cluster_steps.delete_run_pod(run))


def _workload(workload_id: int) -> Workload | None:
    related = Workload.objects.select_related("claim__namespace_request__cluster")
    return related.filter(pk=workload_id).first()


@shared_task(bind=True, max_retries=None)
def start_workload(self: Task, workload_id: int, resume: bool = False) -> None:
    """resume: carry on applying what an earlier attempt began."""
    workload = _workload(workload_id)
    if workload is None:
        return
    resume = resume or self.request.retries > 0
    _step(self, workload, lambda: workload_steps.start_workload(workload, resume=resume))


@shared_task(bind=True, max_retries=None)
def delete_workload(self: Task, workload_id: int) -> None:
    workload = _workload(workload_id)
    if workload is not None:
        # Giving up leaves it to the reconciler (cleaned_up_at stays empty).
        _step(self, workload, lambda: workload_steps.delete_workload(workload))


@shared_task
def reconcile(stale_seconds: float | None = None) -> int:
    """Work whose message was lost, from the database (drift: the cluster loops)."""
    return reconciler.reconcile(stale_seconds=stale_seconds)


@shared_task
def expire_claims() -> None:
    """Remind the owners of claims near their end; reclaim the ones past it."""
    expiry.start_missing_clocks()
    expiry.send_reminders()
    expiry.reclaim_expired()


@shared_task
def reclaim_idle_claims() -> None:
    """Warn the owners of claims idle under their team's policy; release the ones past the
    warning's deadline (claims.domain.idle_reclaim)."""
    idle_reclaim.check_idle_claims()


@shared_task
def purge_expired_tokens() -> int:
    """Expired API tokens no longer log anyone in (portal.lockout checks the one presented);
    their rows go here rather than on every request."""
    deleted, _ = AuthToken.objects.filter(expiry__lt=timezone.now()).delete()
    return deleted


@shared_task
def notify(event: str, kind: str, pk: int, message: str = "") -> None:
    notifications.deliver(event=event, kind=kind, pk=pk, message=message)


@shared_task(bind=True, max_retries=None)
def deliver_webhook(self: Task, delivery_id: int) -> None:
    """POST one notice to a team's webhook; a failure is tried again later, twice as late
    each time, up to WEBHOOK_MAX_RETRIES (every attempt is in the delivery log)."""
    delivery = WebhookDelivery.objects.select_related("webhook").filter(pk=delivery_id).first()
    if delivery is None or delivery.state != WebhookDelivery.State.PENDING:
        return
    delivered = webhooks.attempt(delivery)
    if delivered is False and self.request.retries < settings.WEBHOOK_MAX_RETRIES:
        raise self.retry(countdown=webhooks.backoff(self.request.retries))
    if not delivered:
        webhooks.give_up(delivery)
