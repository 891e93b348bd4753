"""The clusters an admin registers: registration and reachability, credentials
(encrypted kubeconfigs, contexts), and one gateway per cluster connection.
"""
