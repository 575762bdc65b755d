"""Inserting thousands of rows at once, where `bulk_create` costs more than the database.

`bulk_create` prepares every value of every row through the field's full
machinery, and on PostgreSQL Django sends the values inside the statement's
text, which the server parses for every row: for the mining job's batches that
took longer than git's own walk. Here the defaults are prepared once per call,
only the values that need it (JSON, dates) go through their field, and
PostgreSQL takes the rows with COPY.
"""

from contextlib import contextmanager, suppress
from operator import itemgetter
from typing import Any, Callable, Iterator

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.models import Field, Model
from django.utils import timezone

_PASSED_AS_IS = {
    "AutoField", "BigAutoField", "BigIntegerField", "BooleanField", "CharField", "ForeignKey", "IntegerField",
    "OneToOneField", "PositiveIntegerField", "PositiveSmallIntegerField", "SmallIntegerField", "TextField",
}


def text_storable(value) -> str:
    """What PostgreSQL accepts of text that code in a sandbox wrote: no NUL, no lone surrogates."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


def rows_insert(model: type[Model], rows: list[dict], *, conflicts: bool = True) -> None:
    """Insert rows given as {attname: value}, all with the same keys, leaving out any that
    would break a unique constraint, as `bulk_create(ignore_conflicts=True)` does. Fields
    the rows leave out take their default; `auto_now` and `auto_now_add` fields take the
    time of the call. A caller that knows none can conflict says `conflicts=False`: they go
    straight in (one round trip on PostgreSQL instead of three; a conflict is an error then)."""
    if not rows:
        return
    connection = connections[DEFAULT_DB_ALIAS]  # not the proxy: it looks itself up on every use
    by_attname = {field.attname: field for field in model._meta.concrete_fields if not field.primary_key}
    given = list(rows[0])
    rest = [field for name, field in by_attname.items() if name not in rows[0]]
    now = timezone.now()
    rest_values = tuple(
        field.get_db_prep_save(
            now if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
            else field.get_default(), connection)
        for field in rest
    )
    adapted = [(i, _adapter(by_attname[name], connection)) for i, name in enumerate(given)
               if by_attname[name].get_internal_type() not in _PASSED_AS_IS]
    values_of = itemgetter(*given)
    params = []
    for row in rows:
        values = list(values_of(row)) if len(given) > 1 else [row[given[0]]]
        for i, adapt in adapted:
            values[i] = adapt(values[i])
        params.append((*values, *rest_values))
    columns = [by_attname[name].column for name in given] + [field.column for field in rest]
    _insert(connection, model._meta.db_table, columns, params, conflicts)


def _adapter(field: Field, connection) -> Callable[[Any], Any]:
    """The field's own preparation, or for JSON and dates (aware, as the models hold them) the
    database's adaptation it ends in, without the layers in between."""
    kind = field.get_internal_type()
    if kind == "JSONField":
        empty = connection.ops.adapt_json_value([], field.encoder)  # most of a commit's lists of files
        return lambda value: None if value is None else empty if value == [] else \
            connection.ops.adapt_json_value(value, field.encoder)
    if kind == "DateTimeField":
        return connection.ops.adapt_datetimefield_value
    return lambda value: field.get_db_prep_save(value, connection)


def _insert(connection, table: str, columns: list[str], params: list[tuple], conflicts: bool) -> None:
    quote = connection.ops.quote_name
    names = ", ".join(quote(column) for column in columns)
    if connection.vendor == "postgresql" and not conflicts:
        # psycopg's COPY goes around Django's cursor: its errors are made Django's here.
        with connection.wrap_database_errors, connection.cursor() as cursor, \
                cursor.cursor.copy(f"COPY {quote(table)} ({names}) FROM STDIN") as copy:
            for row in params:
                copy.write_row(row)
        return
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {quote(table)} ({names}) VALUES ({', '.join(['%s'] * len(columns))}) "
                "ON CONFLICT DO NOTHING", params)
        return
    # COPY cannot skip conflicting rows: the rows go to a temporary table first. Three round trips
    # in all, with no savepoint: under load each one waits for the server to be scheduled.
    stage = quote(f"{table}_incoming")
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {stage} AS SELECT {names} FROM {quote(table)} WITH NO DATA")
        with connection.wrap_database_errors, cursor.cursor.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
            for row in params:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM {stage} ON CONFLICT DO NOTHING; "
                       f"DROP TABLE {stage}")


@contextmanager
def commits_flushed_later() -> Iterator[None]:
    """Commits on this connection do not wait for the disk while inside: for rows a job can
    derive again. The first commit after it waits for the disk as usual, and so makes every
    earlier one durable too; a crash of the database server before then loses a job that was
    going to be retried anyway. (PostgreSQL, for the session: behind a pooler in transaction
    mode the setting could reach another client. SQLite runs with synchronous=NORMAL.)"""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO OFF")
    try:
        yield
    except BaseException:
        with suppress(DatabaseError):  # a broken connection must not hide what broke it
            _synchronous_commit_reset(connection)
        raise
    _synchronous_commit_reset(connection)


def _synchronous_commit_reset(connection) -> None:
    with connection.cursor() as cursor:
        cursor.execute("RESET synchronous_commit")
