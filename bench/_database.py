"""A PostgreSQL database of a bench's own, on DATABASE_URL's server (or the local one the tests use)."""

import os
from urllib.parse import urlsplit, urlunsplit


def bench_database_url(name: str, given: str = "") -> str:
    """The given database URL's server (else DATABASE_URL's) when it is PostgreSQL, else the
    local one the test suite uses."""
    parts = urlsplit(given or os.environ.get("DATABASE_URL", ""))
    if not parts.scheme.startswith("postgres"):
        parts = urlsplit("postgres://postgres@127.0.0.1:5432/postgres")
    return urlunsplit(parts._replace(path=f"/{name}"))


def database_recreate(url: str, *, create: bool = True) -> None:
    """Drop the bench's database (closing what is connected to it) and make it again, empty."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    server = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            connection.execute(f'CREATE DATABASE "{name}"')
