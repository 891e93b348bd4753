from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0019_run_pod_warnings"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="claimrequest",
            index=models.Index(
                condition=models.Q(("allocation__isnull", False)),
                fields=["namespace_request"],
                name="claimreq_allocated",
            ),
        ),
    ]
