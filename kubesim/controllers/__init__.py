"""Layer 3, beside the kubelet: what kube-scheduler and kube-controller-manager do. The
scheduler with its DRA allocator and node affinity, the namespace lifecycle, the node
lifecycle (cordon taints), ServiceAccounts, the Job controller, TTL after finished and the
garbage collector of ownerReferences. Imports `registry` and `base`, never the kubelet.
"""
