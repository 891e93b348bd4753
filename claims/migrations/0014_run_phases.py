# Placeholder in the chain of this session's migrations; its owner fills in the operations.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("claims", "0013_device_picker")]

    operations: list = []
