"""Layer 6 (top): the cluster a kubesim starts with, read from a topology YAML
(`cluster/topologies/`): nodes, GPUs, ResourceSlices, DeviceClasses, registries.
"""
