"""Change wake-ups: a writer announces a row once its transaction commits; live pages and
long-polls wait on them (Redis pub/sub, with a slow poll without it).
"""
