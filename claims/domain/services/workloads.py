"""Workloads on a claim: admins curate the profiles; a claim's owner starts a batch job or a
notebook from one and stops it; nothing the portal started outlives its claim (the release
and the expiry stop them first, claims.domain.services.steps._release)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from claims.clusters import credentials
from claims.domain import access, state_messages
from claims.domain.services.steps import User, _require_owner_or_approver
from claims.domain.transitions import change, created, enqueue
from claims.kube import names, workload_manifests
from claims.models import ClaimRequest, Workload, WorkloadKind, WorkloadProfile
from claims.policy import workloads as checks
from claims.read import planned

CS = ClaimRequest.State
WS = Workload.State
# A claim whose ResourceClaim is in the cluster: a Pod may use it now.
USABLE_CLAIMS = (CS.WAITING, CS.IN_USE)
PROFILE_FIELDS = (
    "name",
    "kind",
    "description",
    "image",
    "command",
    "args",
    "env",
    "cpu_request",
    "cpu_limit",
    "memory_request",
    "memory_limit",
    "ports",
    "allow_any_image",
    "allowed_images",
    "active_deadline_seconds",
    "backoff_limit",
    "active",
)


# --- Profiles (admins; the views check who) ---


def workload_profile_save(*, profile: WorkloadProfile, **fields: Any) -> WorkloadProfile:
    """Create (an unsaved profile) or change one; every field error at once."""
    if errors := workload_profile_problems(profile=profile, **fields):
        raise ValidationError(errors)
    profile.save()
    return profile


def workload_profile_problems(*, profile: WorkloadProfile, **fields: Any) -> dict[str, list[str]]:
    """Set the fields on profile (not saved) and say what is wrong with it, field by field."""
    for name, value in fields.items():
        if name not in PROFILE_FIELDS:
            raise TypeError(f"no profile field {name!r}")
        setattr(profile, name, value)
    errors: dict[str, list[str]] = {}
    try:
        checks.validate_workload_fields(
            image=profile.image,
            command=profile.command,
            args=profile.args,
            env=profile.env,
            ports=profile.ports,
            resources={name: getattr(profile, name) for name in checks.RESOURCE_FIELDS},
        )
    except ValidationError as error:
        errors.update(error.message_dict)
    allowed = profile.allowed_images
    if not isinstance(allowed, list) or not all(isinstance(i, str) for i in allowed):
        errors["allowed_images"] = [_("Give the allowed images as a list of references.")]
    else:
        bad = [i for i in allowed if checks.image_problem(i.removesuffix("*").rstrip("/:"))]
        if bad:
            errors["allowed_images"] = [
                _("Not image references: %(images)s.") % {"images": ", ".join(bad)}
            ]
    try:
        profile.full_clean(exclude=list(errors))
    except ValidationError as error:
        for field, messages in error.message_dict.items():
            errors.setdefault(field, []).extend(messages)
    return errors


def workload_profile_delete(*, profile: WorkloadProfile) -> None:
    """Workloads started from it keep what they run (copied at the start)."""
    profile.delete()


# --- Workloads ---


def workload_start(
    *,
    user: User,
    claim_request: ClaimRequest,
    profile: WorkloadProfile | int | None,
    image: str | None = None,
    command: str | None = None,
    args: str | None = None,
    env: dict[str, str] | None = None,
) -> Workload:
    """A new workload on the claim, from the profile, with the user's changes (a job's
    command, arguments and environment; any job's or notebook's image, where the profile
    allows it). The row first; a task applies its manifests (the reconciler finishes what a
    lost message left)."""
    claim = claim_request
    _require_owner_or_approver(user, claim.owner_id)
    workload = build_workload(
        claim=claim, profile=profile, image=image, command=command, args=args, env=env
    )
    with transaction.atomic():
        # The claim's state under its lock: a release at the same moment stops this one too.
        locked = ClaimRequest.objects.select_for_update().get(pk=claim.pk)
        if problem := claim_problem(locked):
            raise ValidationError({"claim": [problem]})
        message = gettext_noop("Queued.")
        workload.state_message = message
        if workload.kind == WorkloadKind.NOTEBOOK:
            workload.access_token_encrypted = credentials.encrypt(secrets.token_urlsafe(32))
        workload.save()
        suffix = "job" if workload.kind == WorkloadKind.JOB else "nb"
        workload.name = names.label(claim.name, suffix=f"-{suffix}-{workload.pk}")
        workload.save(update_fields=["name"])
        created(workload, actor=user, message=message)
        enqueue("claims.worker.tasks.start_workload", workload.pk)
    return workload


def claim_problem(claim: ClaimRequest) -> str | None:
    """Why no workload may start on the claim now, or None."""
    if claim.state not in USABLE_CLAIMS:
        return _(
            "The claim is %(state)s; a workload needs a claim that is approved and applied "
            "(waiting or in use)."
        ) % {"state": claim.get_state_display()}
    if claim.expires_at is not None and claim.expires_at <= timezone.now():
        return _("The claim has expired; ask for an extension or a new claim.")
    return None


def _profile(profile: WorkloadProfile | int | None) -> WorkloadProfile:
    if isinstance(profile, WorkloadProfile):
        profile = profile.pk
    found = WorkloadProfile.objects.filter(pk=profile, active=True).first() if profile else None
    if found is None:
        raise ValidationError(
            {"profile": [_("This profile does not exist (any more); choose another.")]}
        )
    return found


def build_workload(
    *,
    claim: ClaimRequest,
    profile: WorkloadProfile | int | None,
    image: str | None = None,
    command: str | None = None,
    args: str | None = None,
    env: dict[str, str] | None = None,
) -> Workload:
    """The unsaved row a start would make, checked (field errors), for the start and for
    the form's preview."""
    chosen = _profile(profile)
    errors: dict[str, list[str]] = {}
    is_job = chosen.kind == WorkloadKind.JOB
    if not is_job:
        for field, value in (("command", command), ("args", args)):
            if value is not None and value.strip() != getattr(chosen, field).strip():
                errors[field] = [_("A notebook runs its profile's command.")]
    image = (image or "").strip() or chosen.image
    workload = Workload(
        claim=claim,
        owner_id=claim.owner_id,
        profile=chosen,
        profile_name=chosen.name,
        kind=chosen.kind,
        image=image,
        command=(command if command is not None and is_job else chosen.command).strip(),
        args=(args if args is not None and is_job else chosen.args).strip(),
        env={**chosen.env, **(env or {})} if isinstance(env, dict | None) else env,
        resources=checks.resources_of(
            {name: getattr(chosen, name) for name in checks.RESOURCE_FIELDS}
        ),
        ports=list(chosen.ports),
        active_deadline_seconds=chosen.active_deadline_seconds,
        backoff_limit=chosen.backoff_limit,
    )
    try:
        checks.validate_workload_fields(
            image=workload.image,
            command=workload.command,
            args=workload.args,
            env=workload.env,
            ports=workload.ports,
            resources={},
        )
    except ValidationError as error:
        for field, messages in error.message_dict.items():
            errors.setdefault(field, []).extend(messages)
    if "image" not in errors and not checks.image_allowed(
        image,
        default=chosen.image,
        allow_any=chosen.allow_any_image,
        listed=chosen.allowed_images,
    ):
        errors["image"] = [
            _("The profile %(profile)s does not allow this image.") % {"profile": chosen.name}
        ]
    if errors:
        raise ValidationError(errors)
    return workload


def workload_access_token(*, user: User, workload: Workload) -> str:
    """A notebook's token, for its owner alone ("" for anyone else, and for a job)."""
    if not user.is_authenticated or user.pk != workload.owner_id:
        return ""
    token = workload.access_token_encrypted
    return credentials.decrypt(token) if token else ""


def workload_stop(*, user: User, workload: Workload) -> Workload:
    """Stop a workload still going: it ends stopped, and its objects are deleted, so DRA
    frees the GPU once no other Pod uses the claim."""
    _require_owner_or_approver(user, workload.owner_id)
    with transaction.atomic():
        Workload.objects.select_for_update().filter(pk=workload.pk).first()
        workload.refresh_from_db(fields=["state"])
        if workload.is_final:
            raise ValidationError(
                {
                    NON_FIELD_ERRORS: [
                        _("The workload already ended (%(state)s): nothing to stop.")
                        % {"state": workload.get_state_display()}
                    ]
                }
            )
        message = state_messages.STOPPED_BY % {"user": user.get_username()}
        change(workload, "stop", actor=user, message=message, finished_at=timezone.now())
        enqueue("claims.worker.tasks.delete_workload", workload.pk)
    return workload


def workload_run_again(*, user: User, workload: Workload) -> Workload:
    """A new workload on the same claim with what this one ran (its profile, image, and a
    job's command, arguments and environment), checked as any start."""
    is_job = workload.kind == WorkloadKind.JOB
    return workload_start(
        user=user,
        claim_request=workload.claim,
        profile=workload.profile_id,
        image=workload.image,
        command=workload.command if is_job else None,
        args=workload.args if is_job else None,
        env=workload.env,
    )


@dataclass(frozen=True)
class NotebookAccess:
    """How a notebook is reached: the port-forward command with the owner's kubeconfig, the
    address it then answers at, the Ingress's link where there is one, and the token (its
    owner's eyes only: "" for anyone else)."""

    port_forward: str
    local_url: str
    url: str
    token: str


def notebook_access(*, user: User, workload: Workload) -> NotebookAccess | None:
    if workload.kind != WorkloadKind.NOTEBOOK or not workload.name:
        return None
    claim = workload.claim
    port = (workload.ports or [workload_manifests.NOTEBOOK_PORT])[0]
    kubeconfig = access.kubeconfig_filename(claim.namespace_request)
    command = (
        f"kubectl --kubeconfig {kubeconfig} --namespace {claim.namespace} "
        f"port-forward service/{workload.name} {port}:{port}"
    )
    host = planned.notebook_host(workload)
    return NotebookAccess(
        port_forward=command,
        local_url=f"http://localhost:{port}/lab",
        url=f"https://{host}/lab" if host else "",
        token=workload_access_token(user=user, workload=workload),
    )
