"""Thin Celery tasks: load by id, talk to the cluster through the gateway, call one service."""

from __future__ import annotations

from celery import shared_task


@shared_task
def apply_namespace(namespace_request_id: int) -> None:
    raise NotImplementedError


@shared_task
def apply_claim(claim_request_id: int) -> None:
    raise NotImplementedError


@shared_task
def delete_claim(claim_request_id: int) -> None:
    raise NotImplementedError


@shared_task
def delete_namespace(namespace_request_id: int) -> None:
    raise NotImplementedError


@shared_task
def start_verification_run(run_id: int) -> None:
    raise NotImplementedError


@shared_task
def sync_all_clusters() -> None:
    raise NotImplementedError


@shared_task
def sync_cluster(cluster_id: int) -> None:
    raise NotImplementedError


@shared_task
def reconcile() -> None:
    raise NotImplementedError
