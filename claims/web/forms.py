"""Forms of the web pages. They shape input; the services decide what is allowed."""

from __future__ import annotations

import secrets
from typing import Any, cast

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from claims.clusters import registry as cluster_registry
from claims.models import Cluster, NamespaceRequest
from claims.policy import limits, validation
from claims.read import approval_queue, selectors

NAME_HELP = gettext_lazy(
    "Lower-case letters, digits and '-', at most 63 characters (a DNS-1123 label)."
)
SELECTOR_HELP = gettext_lazy(
    "Optional; it must hold as well as the picker's choices, e.g. "
    "<code>device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')</code>"
)


class SubmissionTokenMixin(forms.Form):
    """A random token per rendered form, so a second submit of the same form is recognised."""

    submission_token = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial.setdefault("submission_token", secrets.token_urlsafe(16))

    def add_service_errors(self, error: ValidationError) -> None:
        """Put a service's field errors next to their fields, the rest on top."""
        for field, messages in error.message_dict.items():
            target = field if field in self.fields else NON_FIELD_ERRORS
            for message in messages:
                self.add_error(None if target == NON_FIELD_ERRORS else target, message)


class ClusterChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Cluster) -> str:
        return cluster_registry.picker_label(obj)  # "(unreachable since ...)"


class NamespaceRequestForm(SubmissionTokenMixin):
    cluster = ClusterChoiceField(
        queryset=Cluster.objects.none(), empty_label=None, label=gettext_lazy("Cluster")
    )
    name = forms.CharField(
        max_length=limits.NAME_MAX_CHARS, label=gettext_lazy("Name"), help_text=NAME_HELP
    )
    purpose = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=limits.PURPOSE_MAX_CHARS,
        label=gettext_lazy("Purpose"),
        help_text=gettext_lazy("What the GPUs are for; it helps the approver decide."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["cluster"]).queryset = selectors.cluster_list()


class NamespaceChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: NamespaceRequest) -> str:
        return _("%(name)s on %(cluster)s (%(state)s)") % {
            "name": obj.name,
            "cluster": obj.cluster.name,
            "state": obj.get_state_display(),
        }


class ClaimRequestForm(SubmissionTokenMixin):
    namespace_request = NamespaceChoiceField(
        queryset=NamespaceRequest.objects.none(),
        label=gettext_lazy("Namespace"),
        empty_label=None,
    )
    name = forms.CharField(
        max_length=limits.NAME_MAX_CHARS, label=gettext_lazy("Claim name"), help_text=NAME_HELP
    )
    # Free text behind a select, so an unknown class gets the service's explanation.
    device_class = forms.CharField(
        label=gettext_lazy("Device class"),
        widget=forms.Select,
        max_length=limits.DEVICE_CLASS_MAX_CHARS,
    )
    # The device picker (claims.policy.device_picker): what the cluster publishes is offered in the
    # inputs' datalists, which the preview refreshes for the chosen namespace and class.
    gpu_model = forms.CharField(
        required=False,
        max_length=64,
        label=gettext_lazy("GPU model"),
        widget=forms.TextInput(attrs={"list": "gpu-model-options", "autocomplete": "off"}),
        help_text=gettext_lazy("Any model, or one the cluster publishes (pick from the list)."),
    )
    min_memory = forms.CharField(
        required=False,
        max_length=32,
        label=gettext_lazy("Minimum memory"),
        widget=forms.TextInput(attrs={"list": "memory-options", "autocomplete": "off"}),
        help_text=gettext_lazy("Device memory at least this much, e.g. 40Gi."),
    )
    mig_profile = forms.CharField(
        required=False,
        max_length=64,
        label=gettext_lazy("MIG profile"),
        widget=forms.TextInput(attrs={"list": "mig-profile-options", "autocomplete": "off"}),
        help_text=gettext_lazy(
            "For a MIG device class (e.g. mig.nvidia.com): a slice such as 1g.5gb."
        ),
    )
    count = forms.IntegerField(
        required=False,
        initial=1,
        # A browser's arrows stop at 1; the service says why 0 is refused (next to the field).
        widget=forms.NumberInput(attrs={"min": 1}),
        label=gettext_lazy("Count"),
        help_text=gettext_lazy("How many devices."),
    )
    all_devices = forms.BooleanField(
        required=False,
        label=gettext_lazy("All matching devices on one node (allocationMode: All)"),
    )
    selector = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label=gettext_lazy("Advanced: your own CEL selector"),
        help_text=SELECTOR_HELP,
    )
    purpose = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        max_length=limits.PURPOSE_MAX_CHARS,
        label=gettext_lazy("Purpose"),
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        namespaces = selectors.namespaces_for_claims(user=user)
        self.namespace_choices = namespaces
        cast(forms.ModelChoiceField, self.fields["namespace_request"]).queryset = namespaces
        classes = device_class_choices(namespaces)
        self.fields["device_class"].widget.choices = classes
        for position in ALTERNATIVE_POSITIONS:
            for field, made in alternative_fields(classes).items():
                self.fields[validation.alternative_key(position, field)] = made
        self._given_positions: list[int] = []

    def main_fields(self) -> list[Any]:
        """The visible fields but the rows of further alternatives (alternative_rows)."""
        return [f for f in self.visible_fields() if not validation.split_alternative_key(f.name)]

    def alternative_rows(self) -> list[dict[str, Any]]:
        """The rows of alternatives 2 to 8 for the template: their fields, and whether the
        row shows open (something typed in it, or an error)."""
        rows = []
        for position in ALTERNATIVE_POSITIONS:
            keys = [validation.alternative_key(position, f) for f in ALTERNATIVE_FIELDS]
            bound = [self[key] for key in keys]
            typed = self.is_bound and self._row_given(position)
            rows.append(
                {
                    "position": position,
                    "fields": bound,
                    "open": typed or any(field.errors for field in bound),
                }
            )
        return rows

    def _row_given(self, position: int) -> bool:
        """A row counts when a class or a pick is entered (the count alone has a default)."""
        keys = [validation.alternative_key(position, f) for f in ALTERNATIVE_FIELDS[:4]]
        return any(str(self.data.get(self.add_prefix(key)) or "").strip() for key in keys)

    def further_alternatives(self) -> list[dict[str, Any]]:
        """The alternatives the user filled in, in order, gaps closed."""
        data = self.cleaned_data
        self._given_positions = [p for p in ALTERNATIVE_POSITIONS if self._row_given(p)]
        return [
            {field: data.get(validation.alternative_key(p, field)) for field in ALTERNATIVE_FIELDS}
            for p in self._given_positions
        ]

    def add_service_errors(self, error: ValidationError) -> None:
        """The service numbers the alternatives it was given; a row left empty in between
        shifts them: put each error back on the row the user filled."""
        moved: dict[str, list[str]] = {}
        for key, messages in error.message_dict.items():
            moved.setdefault(self._row_key(key), []).extend(messages)
        super().add_service_errors(ValidationError(moved))

    def _row_key(self, key: str) -> str:
        found = validation.split_alternative_key(key)
        if found is None:
            return key
        position, field = found
        index = position - 2
        if 0 <= index < len(self._given_positions):
            return validation.alternative_key(self._given_positions[index], field)
        return key


ALTERNATIVE_FIELDS = validation.ALTERNATIVE_FIELDS
ALTERNATIVE_POSITIONS = range(2, validation.MAX_ALTERNATIVES + 1)


def alternative_fields(classes: list[tuple[str, str]]) -> dict[str, forms.Field]:
    """One alternative's fields: the first alternative's, none required (an empty row is
    no alternative)."""
    return {
        "device_class": forms.CharField(
            required=False,
            label=gettext_lazy("Device class"),
            widget=forms.Select(choices=[("", gettext_lazy("(no alternative)")), *classes]),
            max_length=limits.DEVICE_CLASS_MAX_CHARS,
        ),
        "gpu_model": forms.CharField(
            required=False,
            max_length=64,
            label=gettext_lazy("GPU model"),
            widget=forms.TextInput(attrs={"list": "gpu-model-options", "autocomplete": "off"}),
        ),
        "min_memory": forms.CharField(
            required=False,
            max_length=32,
            label=gettext_lazy("Minimum memory"),
            widget=forms.TextInput(attrs={"list": "memory-options", "autocomplete": "off"}),
        ),
        "mig_profile": forms.CharField(
            required=False,
            max_length=64,
            label=gettext_lazy("MIG profile"),
            widget=forms.TextInput(attrs={"list": "mig-profile-options", "autocomplete": "off"}),
        ),
        "count": forms.IntegerField(
            required=False,
            initial=1,
            widget=forms.NumberInput(attrs={"min": 1}),
            label=gettext_lazy("Count"),
        ),
        "all_devices": forms.BooleanField(
            required=False, label=gettext_lazy("All matching devices on one node")
        ),
    }


def device_class_choices(namespaces: Any) -> list[tuple[str, str]]:
    """Device classes of the clusters the user's namespaces live on, with device counts."""
    clusters = {ns.cluster_id: ns.cluster for ns in namespaces}.values()
    choices: dict[str, str] = {}
    for cluster in clusters:
        for dc in selectors.device_classes(cluster=cluster):
            label = _("%(class)s (%(count)d devices on %(cluster)s)") % {
                "class": dc["name"],
                "count": dc["device_count"],
                "cluster": cluster.name,
            }
            choices.setdefault(dc["name"], label)
    return sorted(choices.items())


class RejectForm(forms.Form):
    reason = forms.CharField(
        required=True,
        max_length=limits.REASON_MAX_CHARS,
        label=gettext_lazy("Reason"),
        error_messages={
            "required": gettext_lazy("Say why, so the requester knows what to change.")
        },
    )


class ApprovalFilterForm(forms.Form):
    """The approval queue's filters (GET); a value that does not parse narrows nothing and
    is answered next to its field."""

    KINDS = [
        ("", gettext_lazy("Namespaces and claims")),
        ("namespace", gettext_lazy("Namespaces")),
        ("claim", gettext_lazy("Claims")),
    ]

    kind = forms.ChoiceField(choices=KINDS, required=False, label=gettext_lazy("Kind"))
    cluster = forms.TypedChoiceField(
        coerce=int, required=False, empty_value=None, label=gettext_lazy("Cluster")
    )
    team = forms.TypedChoiceField(
        coerce=int, required=False, empty_value=None, label=gettext_lazy("Team")
    )
    requester = forms.CharField(
        required=False,
        max_length=150,
        label=gettext_lazy("Requested by"),
        widget=forms.TextInput(attrs={"placeholder": gettext_lazy("username")}),
    )
    device_class = forms.CharField(
        required=False,
        max_length=limits.DEVICE_CLASS_MAX_CHARS,
        label=gettext_lazy("Device class"),
        widget=forms.TextInput(attrs={"placeholder": gettext_lazy("e.g. gpu.nvidia.com")}),
    )
    older_than = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=limits.APPROVALS_MAX_AGE_HOURS,
        label=gettext_lazy("Waiting at least (hours)"),
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # With their inventories: the page's claims show their feasibility on these (a few
        # clusters, each decoded once, rather than a cluster per row).
        self.clusters = list(Cluster.objects.all())
        choices = [("", _("All clusters")), *((c.pk, c.name) for c in self.clusters)]
        cast(forms.TypedChoiceField, self.fields["cluster"]).choices = choices
        teams = selectors.decided_teams(user=user).values_list("pk", "name")
        cast(forms.TypedChoiceField, self.fields["team"]).choices = [("", _("All teams")), *teams]

    def queue_filter(self) -> approval_queue.QueueFilter:
        self.is_valid()
        data = {
            name: self.cleaned_data.get(name) for name in self.fields if name not in self.errors
        }
        return approval_queue.QueueFilter(
            kind=data.get("kind") or "",
            cluster=data.get("cluster"),
            requester=(data.get("requester") or "").strip(),
            device_class=(data.get("device_class") or "").strip(),
            team=data.get("team"),
            older_than=data.get("older_than"),
        )
