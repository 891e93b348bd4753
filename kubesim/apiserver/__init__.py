"""Layer 5: the HTTPS API server. The server and routes, handlers per verb, lists and
watch streams, Table output, discovery, OpenAPI, eviction, and injected faults.
"""
