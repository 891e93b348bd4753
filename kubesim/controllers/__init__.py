"""Layer 3, beside the kubelet: what kube-scheduler and kube-controller-manager do. The
scheduler with its DRA allocator and node affinity, the namespace lifecycle, the node
lifecycle (cordon taints), ServiceAccounts. Imports `registry` and `base`, never the kubelet.
"""
