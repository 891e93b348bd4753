"""The simulated cluster's hardware: nodes, their GPUs, and the objects that publish them.

`load(path)` reads a YAML topology (docs/kubesim-topology.md); `load(None)` is the default:
two nodes, 4 x H100 80GB HBM3 and 4 x A100-SXM4-40GB, as the NVIDIA DRA driver (v25.8
style) publishes them.

This module is where they are imported from; the model and its defaults live in hardware.py,
reading and checking the file in topology_file.py, the objects published in published.py.
"""

from kubesim.cluster.hardware import (
    DEFAULT_IMAGES,
    DEFAULT_K8S_VERSION,
    DEFAULT_PATH,
    DEFAULT_PULL_SECONDS,
    DEVICE_CLASS_CEL,
    DRIVER,
    GPU_EXTENDED_RESOURCE,
    Device,
    Topology,
    TopologyError,
)
from kubesim.cluster.published import device_class_objects, node_object, seed, slice_object
from kubesim.cluster.topology_file import TAINT_KEYS, from_dict, load

__all__ = [
    "DEFAULT_IMAGES",
    "DEFAULT_K8S_VERSION",
    "DEFAULT_PATH",
    "DEFAULT_PULL_SECONDS",
    "DEVICE_CLASS_CEL",
    "DRIVER",
    "GPU_EXTENDED_RESOURCE",
    "TAINT_KEYS",
    "Device",
    "Topology",
    "TopologyError",
    "device_class_objects",
    "from_dict",
    "load",
    "node_object",
    "seed",
    "slice_object",
]
