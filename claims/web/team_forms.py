"""The team page's idle reclaim form: parsing only; the bounds are claims.policy.idle_policy's,
checked by claims.domain.teams as for the API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy


class IdlePolicyForm(forms.Form):
    idle_reclaim = forms.BooleanField(
        required=False,
        label=gettext_lazy("Reclaim idle claims"),
        help_text=gettext_lazy(
            "Warn the owners of idle claims, and release them after the grace period."
        ),
    )
    idle_threshold = forms.FloatField(
        label=gettext_lazy("Idle at or below (GPU activity, 0-1)"),
        widget=forms.NumberInput(attrs={"step": "0.01", "inputmode": "decimal"}),
    )
    idle_window = forms.IntegerField(
        label=gettext_lazy("For (minutes)"),
        help_text=gettext_lazy("How long a claim stays idle before its owner is warned."),
    )
    idle_grace = forms.IntegerField(
        label=gettext_lazy("Released after the warning (minutes)"),
        help_text=gettext_lazy("Unless it is used again or an extension is granted."),
    )

    def __init__(self, *args: Any, team: Any, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", f"idle-{team.pk}")
        kwargs.setdefault(
            "initial",
            {
                "idle_reclaim": team.idle_reclaim,
                "idle_threshold": team.idle_threshold,
                "idle_window": int(team.idle_window.total_seconds() // 60),
                "idle_grace": int(team.idle_grace.total_seconds() // 60),
            },
        )
        super().__init__(*args, **kwargs)
        self.team = team

    def policy(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "idle_reclaim": data["idle_reclaim"],
            "idle_threshold": data["idle_threshold"],
            "idle_window": timedelta(minutes=data["idle_window"]),
            "idle_grace": timedelta(minutes=data["idle_grace"]),
        }
