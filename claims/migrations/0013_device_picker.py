# The device picker's choices on a claim request, and the note of a server dry-run that
# could not run at submit.
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("claims", "0012_clusters")]

    operations = [
        migrations.AddField(
            model_name="claimrequest",
            name="gpu_model",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="claimrequest",
            name="min_memory",
            field=models.CharField(blank=True, max_length=32),
        ),
        migrations.AddField(
            model_name="claimrequest",
            name="mig_profile",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="claimrequest",
            name="dry_run_note",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="namespacerequest",
            name="dry_run_note",
            field=models.TextField(blank=True),
        ),
    ]
