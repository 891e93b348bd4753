# Fixtures live in tests/fixtures/, one module per part, so parallel work never collides here.
pytest_plugins = [
    "tests.fixtures.kubesim",
    "tests.fixtures.portal",
    "tests.fixtures.browser",
    "tests.fixtures.prometheus",
]
