"""What the portal writes on a row is read in the reader's language
(claims.domain.state_messages)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import translation

from claims.domain import observations, state_messages
from claims.kube import preflight
from claims.models import ClaimRequest, Cluster, NamespaceRequest, Profile
from claims.templatetags.portal import user_message
from tests.claims.web.test_i18n import _extracted, signed_in

ROOT = Path(__file__).resolve().parents[3]
FIELD = re.compile(r"%\((\w+)\)([sd])")


def sample_values(msgid: str) -> dict[str, object]:
    """A made-up value per field: a number for %d, a word no catalog holds for %s."""
    return {name: 7 if kind == "d" else f"v-{name}" for name, kind in FIELD.findall(msgid)}


def in_hebrew(text: str) -> str:
    with translation.override("he"):
        return user_message(text)


def hebrew(msgid: str) -> str:
    with translation.override("he"):
        return translation.gettext(msgid)


@pytest.mark.parametrize("msgid", state_messages.MESSAGES)
def test_a_stored_message_is_read_in_hebrew_with_its_values(msgid: str) -> None:
    values = sample_values(msgid)
    assert hebrew(msgid) != msgid, "no Hebrew translation"
    assert in_hebrew(msgid % values) == hebrew(msgid) % values


def test_a_message_added_to_another_is_read_as_the_two() -> None:
    recreated = state_messages.NAMESPACE_RECREATED % {"namespace": "ml"}
    stored = state_messages.REAPPLYING % {"reason": recreated}
    assert in_hebrew(stored) == hebrew(state_messages.REAPPLYING) % {
        "reason": hebrew(state_messages.NAMESPACE_RECREATED) % {"namespace": "ml"}
    }
    # Not "running on <node>. Gave up reading the logs: ...", with the rest taken for the node.
    running = state_messages.RUNNING_ON % {"node": "gpu-node-1"}
    gone = state_messages.POD_GONE
    stored = state_messages.GAVE_UP_ON_LOGS_TOO % {"before": running, "reason": gone}
    assert in_hebrew(stored) == hebrew(state_messages.GAVE_UP_ON_LOGS_TOO) % {
        "before": hebrew(state_messages.RUNNING_ON) % {"node": "gpu-node-1"},
        "reason": hebrew(gone),
    }


def test_a_state_in_a_message_is_named_as_the_pages_name_it() -> None:
    stored = state_messages.CLAIM_IS % {"state": "in use"}
    with translation.override("he"):
        label = translation.pgettext("state", "in use")
    assert label != "in use"
    assert in_hebrew(stored) == hebrew(state_messages.CLAIM_IS) % {"state": label}


def test_what_the_cluster_said_stays_as_it_was_said() -> None:
    said = "0/2 nodes are available: 2 Insufficient gpu.nvidia.com."
    stored = state_messages.POD_DID_NOT_START % {"seconds": 300, "reason": said}
    assert in_hebrew(stored) == hebrew(state_messages.POD_DID_NOT_START) % {
        "seconds": 300,
        "reason": said,
    }


def test_makemessages_finds_each_for_the_translators(tmp_path: Path) -> None:
    found = _extracted(tmp_path)
    for msgid in state_messages.MESSAGES:
        assert msgid in found, msgid
        assert "python-format" in found[msgid] or not FIELD.search(msgid), msgid
    plain = [
        value
        for name, value in vars(state_messages).items()
        if name.isupper() and isinstance(value, str) and value not in state_messages.MESSAGES
    ]
    assert plain and all(msgid in found for msgid in plain), plain
    # claims.kube marks its own with a gettext_noop of its own (it imports no Django).
    assert preflight.GPU_NODES in _plain_messages()
    assert [msgid for msgid in _plain_messages() if msgid not in found] == []


def _worded_in_place(path: Path) -> list[str]:
    """message= and reason= given text written out in the call (an f-string, a literal, a sum)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        for keyword in getattr(node, "keywords", []) if isinstance(node, ast.Call) else []:
            value = keyword.value
            if isinstance(value, ast.BinOp):  # "..." + x, "..." % x; not state_messages.X % x
                value = value.left
            worded = isinstance(value, ast.JoinedStr) or (
                isinstance(value, ast.Constant) and isinstance(value.value, str)
            )
            if keyword.arg in ("message", "reason") and worded:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_portal_words_what_it_stores_in_state_messages() -> None:
    """A message written out where a state changes would be stored, and shown, in English
    only; its words belong in claims.domain.state_messages (or claims.domain.expiry,
    claims.policy.rules)."""
    rooms = ("domain", "policy", "read", "clusters", "worker", "notify", "live")
    modules = sorted(
        [
            *(ROOT / "claims").glob("*.py"),
            *(p for r in rooms for p in (ROOT / "claims" / r).rglob("*.py")),
        ]
    )
    assert [place for module in modules for place in _worded_in_place(module)] == []


@pytest.mark.django_db
def test_a_hebrew_reader_sees_the_allocation_in_hebrew(alice: User) -> None:
    cluster = Cluster.objects.create(name="lab")
    ns = NamespaceRequest.objects.create(
        owner=alice, cluster=cluster, name="team-a", state="active"
    )
    claim = ClaimRequest.objects.create(
        owner=alice,
        namespace_request=ns,
        name="train",
        device_class="gpu.nvidia.com",
        state="waiting",
    )
    allocation = {"node": "gpu-node-1", "devices": [{"device": "gpu-0"}], "reserved_for": []}
    observations.claim_allocation_seen(claim_request=claim, allocation=allocation)
    Profile.objects.create(user=alice, language="he")

    page = signed_in(alice).get(reverse("claim", args=[claim.pk])).text

    said = hebrew(state_messages.ALLOCATED) % {"devices": "gpu-0", "node": "gpu-node-1"}
    assert said in page
    assert "Allocated gpu-0" not in page


def _plain_messages() -> list[str]:
    """The messages without values the portal writes on rows (gettext_noop in claims/)."""
    found = set()
    for path in sorted((ROOT / "claims").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "func", None)
            called = getattr(name, "id", None) or getattr(name, "attr", None)
            if isinstance(node, ast.Call) and called == "gettext_noop" and node.args:
                text = node.args[0]
                if isinstance(text, ast.Constant) and not FIELD.search(str(text.value)):
                    found.add(str(text.value))
    return sorted(found)


@pytest.mark.parametrize("msgid", _plain_messages())
def test_it_reads_a_stored_message_without_values_as_itself(msgid: str) -> None:
    """Not taken for one with values: "Pod created; waiting to schedule." is no "Pod %(state)s."
    with a state nobody translates."""
    assert in_hebrew(msgid) == hebrew(msgid)
