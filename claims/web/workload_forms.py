"""Forms of the workload pages: start a workload on a claim, and the profiles admins curate.
They shape input; the services decide what is allowed."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy

from claims.models import WorkloadProfile
from claims.policy import limits
from claims.policy import workloads as workload_checks
from claims.web.forms import SubmissionTokenMixin


class WorkloadForm(SubmissionTokenMixin):
    """Start a workload on a claim: a profile, and what a job changes of it."""

    profile = forms.TypedChoiceField(
        coerce=int, choices=(), label=gettext_lazy("Profile"), empty_value=None
    )
    image = forms.CharField(
        required=False,
        max_length=500,
        label=gettext_lazy("Image"),
        help_text=gettext_lazy("Empty: the profile's image. Another one where it allows."),
    )
    command = forms.CharField(
        required=False,
        max_length=limits.PURPOSE_MAX_CHARS,
        label=gettext_lazy("Command"),
        help_text=gettext_lazy(
            "A batch job's command as you would type it in a shell, e.g. "
            "<code>python train.py</code>. Empty: the profile's."
        ),
    )
    args = forms.CharField(
        required=False,
        max_length=limits.PURPOSE_MAX_CHARS,
        label=gettext_lazy("Arguments"),
        help_text=gettext_lazy("e.g. <code>--epochs 3 --out /tmp/model</code>"),
    )
    env = forms.CharField(
        required=False,
        max_length=limits.PURPOSE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        label=gettext_lazy("Environment"),
        help_text=gettext_lazy("One NAME=value per line, added to the profile's."),
    )

    def __init__(self, *args: Any, profiles: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = cast(forms.TypedChoiceField, self.fields["profile"])
        field.choices = [(p.pk, f"{p.name} ({p.get_kind_display()})") for p in profiles]


class WorkloadProfileForm(forms.ModelForm):
    """An admin's profile: command and args as shell words, env as NAME=value lines, ports
    and allowed images as lists in text."""

    env_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        label=gettext_lazy("Environment"),
        help_text=gettext_lazy("One NAME=value per line."),
    )
    ports_text = forms.CharField(
        required=False,
        label=gettext_lazy("Ports"),
        help_text=gettext_lazy("Container ports, e.g. 8888 (a notebook's Service serves them)."),
    )
    allowed_images_text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        label=gettext_lazy("Allowed images"),
        help_text=gettext_lazy(
            'One per line; a line ending in "*" allows every image it starts, e.g. '
            "<code>nvcr.io/nvidia/*</code>. The profile's own image is always allowed."
        ),
    )

    class Meta:
        model = WorkloadProfile
        fields = [
            "name",
            "kind",
            "description",
            "image",
            "command",
            "args",
            "cpu_request",
            "cpu_limit",
            "memory_request",
            "memory_limit",
            "allow_any_image",
            "active_deadline_seconds",
            "backoff_limit",
            "active",
        ]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "command": forms.TextInput(),
            "args": forms.TextInput(),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        profile = self.instance
        if not self.is_bound and profile.pk:
            self.initial["env_text"] = workload_checks.env_lines(profile.env)
            self.initial["ports_text"] = ", ".join(str(p) for p in profile.ports)
            self.initial["allowed_images_text"] = "\n".join(profile.allowed_images)

    def service_fields(self) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The fields as claims.domain.services.workload_profile_save takes them, and the
        errors of the text that did not parse (an environment line without "=")."""
        data = {name: self.cleaned_data[name] for name in self.Meta.fields}
        errors: dict[str, list[str]] = {}
        try:
            data["env"] = workload_checks.parse_env_lines(self.cleaned_data.get("env_text", ""))
        except ValidationError as error:
            data["env"], errors = {}, error.message_dict
        data["ports"] = workload_checks.parse_ports(self.cleaned_data.get("ports_text", ""))
        lines = self.cleaned_data.get("allowed_images_text", "").splitlines()
        data["allowed_images"] = [line.strip() for line in lines if line.strip()]
        return data, errors

    def add_service_errors(self, error: ValidationError) -> None:
        renamed = {
            "env": "env_text",
            "ports": "ports_text",
            "allowed_images": "allowed_images_text",
        }
        for field, messages in error.message_dict.items():
            target = renamed.get(field, field)
            for message in messages:
                self.add_error(target if target in self.fields else None, message)
