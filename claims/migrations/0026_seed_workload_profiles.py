"""The two workload profiles a new portal offers; admins change or replace them."""

from django.db import migrations

PROFILES = [
    {
        "name": "JupyterLab with CUDA",
        "kind": "notebook",
        "description": (
            "JupyterLab with PyTorch and CUDA 12 on your claim's GPU. Open it in your browser "
            "with the token shown to you; files outside your home folder are lost when it stops."
        ),
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-latest",
        "command": "",
        "args": "",
        "env": {},
        "cpu_request": "1",
        "cpu_limit": "4",
        "memory_request": "4Gi",
        "memory_limit": "16Gi",
        "ports": [8888],
        "allow_any_image": False,
        "allowed_images": ["quay.io/jupyter/*"],
    },
    {
        "name": "Batch job: your image and command",
        "kind": "job",
        "description": (
            "Runs your image and command once on your claim's GPU and ends. A command that "
            "fails with a bug (exit code 1, 2, 126 or 127) is not run again."
        ),
        "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
        "command": "nvidia-smi",
        "args": "",
        "env": {},
        "cpu_request": "1",
        "cpu_limit": "4",
        "memory_request": "2Gi",
        "memory_limit": "8Gi",
        "ports": [],
        "allow_any_image": True,
        "allowed_images": [],
        "backoff_limit": 2,
    },
]


def seed(apps, schema_editor):
    WorkloadProfile = apps.get_model("claims", "WorkloadProfile")
    present = set(WorkloadProfile.objects.values_list("name", flat=True))
    # bulk_create: no save signal, so no audit row of an admin's edit nobody made.
    WorkloadProfile.objects.bulk_create(
        WorkloadProfile(**fields) for fields in PROFILES if fields["name"] not in present
    )


def unseed(apps, schema_editor):
    WorkloadProfile = apps.get_model("claims", "WorkloadProfile")
    WorkloadProfile.objects.filter(name__in=[p["name"] for p in PROFILES]).delete()


class Migration(migrations.Migration):
    dependencies = [("claims", "0025_workloads")]

    operations = [migrations.RunPython(seed, unseed)]
