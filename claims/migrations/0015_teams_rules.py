# Teams get roles (member, team approver), quotas per cluster and device class (devices held,
# claim lifetime) and approval rules. The old team-wide gpu_quota becomes one quota per
# cluster and device class known at migration time; the members keep their teams.
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def keep_members(apps, schema_editor):
    Team = apps.get_model("claims", "Team")
    TeamMembership = apps.get_model("claims", "TeamMembership")
    old = Team.members.through.objects.all()
    TeamMembership.objects.bulk_create(
        TeamMembership(team_id=row.team_id, user_id=row.user_id, role="member") for row in old
    )


def spread_quotas(apps, schema_editor):
    Team = apps.get_model("claims", "Team")
    Cluster = apps.get_model("claims", "Cluster")
    TeamQuota = apps.get_model("claims", "TeamQuota")
    clusters = list(Cluster.objects.all())
    for team in Team.objects.filter(gpu_quota__gt=0):
        for cluster in clusters:
            for device_class in (cluster.inventory or {}).get("device_counts", {}):
                TeamQuota.objects.create(
                    team=team,
                    cluster=cluster,
                    device_class=device_class,
                    max_devices=team.gpu_quota,
                )


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0014_run_phases"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="TeamMembership",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "role",
                    models.CharField(
                        choices=[("member", "member"), ("approver", "team approver")],
                        default="member",
                        max_length=20,
                    ),
                ),
                ("joined", models.DateTimeField(auto_now_add=True)),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="claims.team",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["team", "joined", "id"]},
        ),
        migrations.AddConstraint(
            model_name="teammembership",
            constraint=models.UniqueConstraint(fields=("team", "user"), name="unique_team_member"),
        ),
        migrations.RunPython(keep_members, migrations.RunPython.noop),
        migrations.RemoveField(model_name="team", name="members"),
        migrations.AddField(
            model_name="team",
            name="members",
            field=models.ManyToManyField(
                blank=True,
                related_name="gpu_teams",
                through="claims.TeamMembership",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.CreateModel(
            name="TeamQuota",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("device_class", models.CharField(max_length=253)),
                (
                    "max_devices",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Devices the team's live claims may hold at once; empty = no "
                        "limit. An 'all devices' claim counts every device of the class on the "
                        "cluster.",
                        null=True,
                    ),
                ),
                (
                    "max_lifetime",
                    models.DurationField(
                        blank=True, help_text="Longest a claim may live; empty = no cap.", null=True
                    ),
                ),
                (
                    "default_lifetime",
                    models.DurationField(
                        blank=True,
                        help_text="A claim's lifetime unless it asks for another.",
                        null=True,
                    ),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="team_quotas",
                        to="claims.cluster",
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="quotas",
                        to="claims.team",
                    ),
                ),
            ],
            options={"ordering": ["team", "cluster", "device_class"]},
        ),
        migrations.AddConstraint(
            model_name="teamquota",
            constraint=models.UniqueConstraint(
                fields=("team", "cluster", "device_class"), name="unique_team_quota"
            ),
        ),
        migrations.RunPython(spread_quotas, migrations.RunPython.noop),
        migrations.RemoveField(model_name="team", name="gpu_quota"),
        migrations.AlterField(
            model_name="team",
            name="auto_approve",
            field=models.BooleanField(
                default=False,
                help_text="Approve every request of the team within its quotas without an "
                "approver (finer choices: approval rules).",
            ),
        ),
        migrations.CreateModel(
            name="ApprovalRule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.SlugField(
                        help_text="Named in the audit trail.", max_length=100, unique=True
                    ),
                ),
                (
                    "applies_to",
                    models.CharField(
                        choices=[
                            ("claim", "claim requests"),
                            ("namespace", "namespace requests"),
                            ("extension", "lifetime extensions"),
                        ],
                        default="claim",
                        max_length=20,
                    ),
                ),
                (
                    "device_class",
                    models.CharField(
                        blank=True, help_text="Empty: every device class.", max_length=253
                    ),
                ),
                (
                    "max_devices",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="At most this many devices; empty: any number.",
                        null=True,
                    ),
                ),
                (
                    "max_lifetime",
                    models.DurationField(
                        blank=True,
                        help_text="Extensions: the claim's whole lifetime stays within this; "
                        "empty: any.",
                        null=True,
                    ),
                ),
                ("enabled", models.BooleanField(default=True)),
                ("position", models.PositiveIntegerField(default=100)),
                (
                    "cluster",
                    models.ForeignKey(
                        blank=True,
                        help_text="Empty: every cluster.",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="claims.cluster",
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        blank=True,
                        help_text="Empty: every team.",
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="claims.team",
                    ),
                ),
            ],
            options={"ordering": ["position", "name"]},
        ),
    ]
