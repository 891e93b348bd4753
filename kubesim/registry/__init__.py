"""Layer 2: storage and everything an object passes through on its way in. The store
(resourceVersion, watches), the kinds (`registry.kinds`: versions, conversion, defaults,
validation), admission (ResourceQuota, reservations), apply and patch, managed fields,
graceful deletion, dry-run, Events. Imports only `base`.
"""
