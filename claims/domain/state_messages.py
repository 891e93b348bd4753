"""What the portal writes on a row when it changes state, worded by the portal itself.

Stored in English, as the audit trail and the API keep them; a page or an email shows each in
its reader's language: claims.templatetags.portal.user_message matches a stored message back
to its msgid here (or in claims.domain.expiry and claims.policy.rules) and translates it
with its values. A value named reason, before or state is a message of its own, translated
in turn; the rest (names, nodes, devices, what the cluster said) are shown as they are. The
preflight checks a cluster's row keeps are worded in claims.kube.preflight and read back the
same way.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from claims.kube import kueue, preflight

NAMESPACE_FAILED = gettext_noop("Namespace %(namespace)s: %(reason)s")
NAMESPACE_RECREATED = gettext_noop("Namespace %(namespace)s was recreated.")
NAMESPACE_DELETED_OUTSIDE = gettext_noop("Namespace %(namespace)s was deleted outside the portal.")
CREATING_AGAIN = gettext_noop("%(reason)s Creating it again.")
REAPPLYING = gettext_noop("%(reason)s Re-applying the ResourceClaim.")
CLAIM_FAILED = gettext_noop("The claim failed: %(reason)s")
CLAIM_REJECTED = gettext_noop("The claim was rejected: %(reason)s")
CLAIM_IS = gettext_noop("The claim is %(state)s.")
ALLOCATED = gettext_noop("Allocated %(devices)s on %(node)s.")
RUNNING_ON = gettext_noop("Running on %(node)s.")
CANCELLED_BY = gettext_noop("Cancelled by %(user)s.")
STOPPED_BY = gettext_noop("Stopped by %(user)s.")
WORKLOAD_FAILED = gettext_noop("The cluster refused it: %(reason)s")
# A notebook's or a run's Pod that waits in the queue (claims/worker/queue_turn.py).
WAITS_ITS_TURN = gettext_noop(
    "Waiting for a GPU: its Pod is created when its claim's turn in the queue comes."
)
WORKLOAD_POD_FAILED = gettext_noop("Its Pod failed: %(reason)s")
WORKLOAD_JOB_FAILED = gettext_noop("The Job failed (%(reason)s): %(message)s")
ORPHAN_DELETED = gettext_noop(
    "Deleted orphan %(kind)s %(where)s from the cluster: its request is gone."
)
GAVE_UP_ON_LOGS = gettext_noop("Gave up reading the logs: %(reason)s.")
GAVE_UP_ON_LOGS_TOO = gettext_noop("%(before)s Gave up reading the logs: %(reason)s.")
STILL_UNREADABLE = gettext_noop("still unreadable: %(problem)s")
LOGS_READ_PASSED = gettext_noop("Logs read after all: CUDA samples passed.")
LOGS_READ_NOT_PASSED = gettext_noop("Logs read after all: the CUDA samples did not pass.")

NAMESPACE_REJECTED = gettext_noop("Namespace %(namespace)s was rejected: %(reason)s")
NAMESPACE_IS = gettext_noop("Namespace %(namespace)s is %(state)s.")
NAMESPACE_NOT_OURS_LEFT = gettext_noop(
    "Request deleted; namespace %(namespace)s is not the portal's and was left as it was."
)
NAMESPACE_REPLACED = gettext_noop(
    "Namespace %(namespace)s was replaced outside the portal by one it does not manage; "
    "nothing in it was changed."
)
LABELS_RESTORED = gettext_noop(
    "The labels of namespace %(namespace)s were changed outside the portal; restored."
)
ACCESS_REMOVED = gettext_noop("%(kinds)s of namespace %(namespace)s removed outside the portal.")
GRANTING_AGAIN = gettext_noop("%(reason)s Granting access again.")
WAITING_FOR_CLUSTER = gettext_noop(
    "Waiting for the cluster (trying again in %(seconds)d s): %(reason)s"
)
CLAIM_CREATED = gettext_noop(
    "ResourceClaim created (%(version)s). DRA allocates a GPU only while a Pod uses it."
)
KUBECONFIG_ISSUED = gettext_noop("Kubeconfig issued, valid until %(ends)s.")
POD_CREATED = gettext_noop("Pod created; waiting to schedule.")
POD_BOUND = gettext_noop(
    "Bound to node %(node)s; the kubelet is preparing its containers (ContainerCreating)."
)
POD_PULLING = gettext_noop("Bound to node %(node)s; pulling the image: %(event)s")
POD_STARTING = gettext_noop("Bound to node %(node)s; starting the containers: %(event)s")
POD_IMAGE_NOT_PULLED = gettext_noop(
    "Bound to node %(node)s; the image cannot be pulled: %(problem)s"
)
POD_ENDED = gettext_noop("Pod %(state)s.")
POD_DID_NOT_START = gettext_noop("The Pod did not start within %(seconds)d seconds: %(reason)s")
DEVICES_FROM_DEVICE_QUERY = gettext_noop(
    "%(before)s The cluster's allocation was not seen while the Pod ran, so the devices are "
    "named as deviceQuery printed them."
)
LOGS_UNREAD = gettext_noop(
    "%(before)s Its logs could not be read (%(problem)s), so the verdict is not known yet; the "
    "portal reads them again while the Pod is there."
)
FAILED_LOGIN = gettext_noop("Failed login as %(name)s.")
LOCKED_OUT = gettext_noop("Too many failed logins from %(address)s: locked out.")

DRY_RUN_UNREACHABLE = gettext_noop(
    "%(cluster)s could not check this request before it was queued: the cluster has been "
    "unreachable since %(since)s, so it was not asked."
)
DRY_RUN_NOT_ASKED = gettext_noop(
    "%(cluster)s could not check this request before it was queued: %(reason)s"
)

CUDA_PASSED = gettext_noop("CUDA samples passed.")
NO_REASON_FROM_CLUSTER = gettext_noop("no reason given by the cluster")
NO_POD_USES_IT = gettext_noop("No Pod uses the claim now, so DRA holds no GPU for it.")
CLAIM_DELETED_OUTSIDE = gettext_noop("The ResourceClaim was deleted outside the portal.")
CLAIM_LABELS_RESTORED = gettext_noop(
    "The ResourceClaim's labels were changed outside the portal; restored."
)
NAMESPACE_WITHDRAWN = gettext_noop("The namespace request was withdrawn.")
RELEASED_WITH_NAMESPACE = gettext_noop("Released with its namespace.")
POD_GONE = gettext_noop("the Pod is gone")
RELEASE_WAITING_FOR_KUBELET = gettext_noop(
    "Released; waiting for the node's kubelet: Pod %(pod)s on %(node)s is terminating and holds "
    "the GPU until its kubelet confirms it stopped."
)
POD_NO_LONGER_THERE = gettext_noop("The Pod is no longer in the cluster.")

# The ones with values. A stored message is matched against them in this order, the first that
# fits the whole of it wins: those that add a sentence to another message come first, or
# "Running on a. Gave up reading the logs: ..." would be read as running on all the rest.
MESSAGES = (
    CREATING_AGAIN,
    REAPPLYING,
    GRANTING_AGAIN,
    GAVE_UP_ON_LOGS_TOO,
    DEVICES_FROM_DEVICE_QUERY,
    LOGS_UNREAD,
    ACCESS_REMOVED,
    NAMESPACE_RECREATED,
    NAMESPACE_DELETED_OUTSIDE,
    NAMESPACE_REPLACED,
    NAMESPACE_NOT_OURS_LEFT,
    NAMESPACE_REJECTED,
    NAMESPACE_IS,
    NAMESPACE_FAILED,
    LABELS_RESTORED,
    WAITING_FOR_CLUSTER,
    CLAIM_CREATED,
    KUBECONFIG_ISSUED,
    POD_CREATED,  # a message without values, or "Pod %(state)s." would take it
    POD_BOUND,
    POD_PULLING,
    POD_STARTING,
    POD_IMAGE_NOT_PULLED,
    POD_ENDED,
    POD_DID_NOT_START,
    FAILED_LOGIN,
    LOCKED_OUT,
    DRY_RUN_UNREACHABLE,
    DRY_RUN_NOT_ASKED,
    CLAIM_FAILED,
    CLAIM_REJECTED,
    CLAIM_IS,
    RELEASE_WAITING_FOR_KUBELET,
    ALLOCATED,
    RUNNING_ON,
    CANCELLED_BY,
    STOPPED_BY,
    WORKLOAD_FAILED,
    WORKLOAD_POD_FAILED,
    WORKLOAD_JOB_FAILED,
    ORPHAN_DELETED,
    GAVE_UP_ON_LOGS,
    STILL_UNREADABLE,
    *preflight.MESSAGES,
    *kueue.MESSAGES,
)
