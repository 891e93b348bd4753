"""Reads for pages and the API, scoped to what the user may see: selectors, the approval
queue, the audit trail's filter, why a claim waits, the GPU map, the inventory, the
manifests a row will apply.
"""
