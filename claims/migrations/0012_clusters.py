# Clusters registered in the UI: an encrypted kubeconfig, and since when one is unreachable.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("claims", "0011_profile")]

    operations = [
        migrations.AddField(
            model_name="cluster",
            name="kubeconfig_encrypted",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="cluster",
            name="unreachable_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
