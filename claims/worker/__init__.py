"""Everything that runs without a request: thin Celery tasks, one cluster step per task
(cluster_steps), one loop per cluster under one lease (cluster_loop, lease) that watches it and
feeds from its caches (cluster_view) the sync of claims and runs (sync, run_pods, log_streams)
and the reconciler's drift checks (reconciler). Pages and the API never import it.
"""
