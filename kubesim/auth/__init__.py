"""Layer 4: who asks and what they may do. Bearer and ServiceAccount tokens, impersonation,
RBAC with the bootstrap policy and aggregation, escalation checks, Token/Access/Rules reviews,
the audit log. Imports the layers below.
"""
