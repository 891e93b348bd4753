"""Layer 3, beside the controllers: the simulated kubelet. Pod runs through their phases,
image pulls, container statuses, graceful termination, activeDeadlineSeconds and the CUDA
samples' output. Imports `registry` and `base`, never the controllers.
"""
