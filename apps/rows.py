"""Inserting thousands of rows at once, where `bulk_create` costs more than the database.

`bulk_create` prepares every value of every row through the field's full
machinery, and on PostgreSQL Django sends the values inside the statement's
text, which the server parses for every row: for the mining job's batches that
took longer than git's own walk. Here the defaults are prepared once per call,
only the values that need it (JSON, dates) go through their field, and
PostgreSQL takes the rows with COPY.
"""

from operator import itemgetter

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model
from django.utils import timezone

_PASSED_AS_IS = {
    "AutoField", "BigAutoField", "BigIntegerField", "BooleanField", "CharField", "ForeignKey", "IntegerField",
    "OneToOneField", "PositiveIntegerField", "PositiveSmallIntegerField", "SmallIntegerField", "TextField",
}


def rows_insert(model: type[Model], rows: list[dict]) -> None:
    """Insert rows given as {attname: value}, all with the same keys, leaving out any that
    would break a unique constraint, as `bulk_create(ignore_conflicts=True)` does. Fields
    the rows leave out take their default; `auto_now` and `auto_now_add` fields take the
    time of the call."""
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
    adapted = [(i, by_attname[name]) for i, name in enumerate(given)
               if by_attname[name].get_internal_type() not in _PASSED_AS_IS]
    values_of = itemgetter(*given)
    params = []
    for row in rows:
        values = list(values_of(row)) if len(given) > 1 else [row[given[0]]]
        for i, field in adapted:
            values[i] = field.get_db_prep_save(values[i], connection)
        params.append((*values, *rest_values))
    columns = [by_attname[name].column for name in given] + [field.column for field in rest]
    _insert(connection, model._meta.db_table, columns, params)


def _insert(connection, table: str, columns: list[str], params: list[tuple]) -> None:
    quote = connection.ops.quote_name
    names = ", ".join(quote(column) for column in columns)
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {quote(table)} ({names}) VALUES ({', '.join(['%s'] * len(columns))}) "
                "ON CONFLICT DO NOTHING", params)
        return
    # COPY cannot skip conflicting rows: the rows go to a temporary table first.
    stage = quote(f"{table}_incoming")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {stage} AS SELECT {names} FROM {quote(table)} WITH NO DATA")
        with cursor.cursor.copy(f"COPY {stage} ({names}) FROM STDIN") as copy:
            for row in params:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM {stage} ON CONFLICT DO NOTHING")
        cursor.execute(f"DROP TABLE {stage}")
