"""The pages: views, forms, URLs, the per-user language and audit-context middleware."""
