# Claim lifetimes and extensions, notification preferences, team webhooks and their deliveries.
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def _notify(label: str, help_text: str) -> models.BooleanField:
    return models.BooleanField(default=True, help_text=help_text, verbose_name=label)


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0015_teams_rules"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="claimrequest",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="claimrequest",
            name="lifetime",
            field=models.DurationField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="claimrequest",
            name="reminded_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="claimrequest",
            index=models.Index(fields=["expires_at"], name="claimreq_expires"),
        ),
        migrations.AddField(
            model_name="profile",
            name="notify_decisions",
            field=_notify("Decisions", "A request or an extension approved or rejected."),
        ),
        migrations.AddField(
            model_name="profile",
            name="notify_allocation",
            field=_notify("Allocation", "A claim got its devices."),
        ),
        migrations.AddField(
            model_name="profile",
            name="notify_failure",
            field=_notify("Failures", "A request failed in the cluster."),
        ),
        migrations.AddField(
            model_name="profile",
            name="notify_expiry",
            field=_notify("Expiry", "A claim is about to expire, or was reclaimed."),
        ),
        migrations.AddField(
            model_name="profile",
            name="notify_approvals",
            field=_notify(
                "Decisions to make",
                "Approvers: someone asks for more time for a claim you may decide on.",
            ),
        ),
        migrations.CreateModel(
            name="ClaimExtension",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),  # noqa: E501
                ("extra", models.DurationField(help_text="How much longer the claim may live.")),
                ("reason", models.TextField(blank=True)),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "pending"),
                            ("approved", "approved"),
                            ("rejected", "rejected"),
                        ],  # noqa: E501
                        default="pending",
                        max_length=20,
                    ),
                ),
                ("decided_at", models.DateTimeField(blank=True, null=True)),
                ("decision", models.TextField(blank=True)),
                ("expires_before", models.DateTimeField(blank=True, null=True)),
                ("expires_after", models.DateTimeField(blank=True, null=True)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "claim",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="extensions",
                        to="claims.claimrequest",
                    ),
                ),
                (
                    "decided_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "requested_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created"],
                "indexes": [
                    models.Index(fields=["state", "created"], name="extension_state_oldest")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("state", "pending")),
                        fields=("claim",),
                        name="one_pending_extension",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="TeamWebhook",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),  # noqa: E501
                ("url", models.URLField(max_length=500)),
                (
                    "secret",
                    models.CharField(
                        help_text="Signs each body: X-Portal-Signature: sha256=HMAC(secret, body).",
                        max_length=200,
                    ),
                ),
                ("active", models.BooleanField(default=True)),
                (
                    "team",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="webhook",
                        to="claims.team",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="WebhookDelivery",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),  # noqa: E501
                ("event", models.CharField(max_length=40)),
                ("payload", models.JSONField()),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "pending"),
                            ("delivered", "delivered"),
                            ("failed", "failed"),
                        ],  # noqa: E501
                        default="pending",
                        max_length=20,
                    ),
                ),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("last_status", models.PositiveIntegerField(blank=True, null=True)),
                ("last_error", models.TextField(blank=True)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                ("delivered_at", models.DateTimeField(blank=True, null=True)),
                (
                    "webhook",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deliveries",
                        to="claims.teamwebhook",
                    ),
                ),
            ],
            options={
                "ordering": ["-created"],
                "indexes": [models.Index(fields=["webhook", "-created"], name="delivery_newest")],
            },
        ),
    ]
