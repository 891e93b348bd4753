"""Every write to a request row: transitions (CHANGES, the one table of allowed state changes),
the services users ask for (by model), what the cluster reports (observations), audit,
expiry, the dry-run step of a submit, access, the words stored with each change.
"""
