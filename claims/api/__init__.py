"""The REST API for scripts (/api/v1/): the same services and selectors as the pages."""
