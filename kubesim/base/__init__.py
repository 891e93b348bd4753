"""Layer 1 (bottom): what every other layer speaks. Kubernetes `Status` errors, Go-compatible
JSON and value printing, protobuf envelopes, the HTTP request and answers, label and field
selectors, TLS certificates, the DRA CEL bridge to `dracel`, and a small work queue. Imports
nothing else of kubesim.
"""
