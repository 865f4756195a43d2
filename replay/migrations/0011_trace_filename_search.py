"""The trace list's search by a part of a file name, answered by a trigram index (PostgreSQL).

``?q=`` matches a part of a file name in any case, which Django writes as
``UPPER(filename) LIKE UPPER('%q%')`` and no b-tree answers: at 100,000 traces every search
read every row. pg_trgm's GIN operator class answers that LIKE on the same expression
(``console.selectors.listing.search_q`` says which index answers each of the search's
alternatives). On SQLite this migration makes nothing: the list reads the rows as before.

pg_trgm is a trusted extension (PostgreSQL 13 and later): a role with the CREATE right on the
database, as its owner has, may create it without being a superuser, so the least-privilege
owner role that runs ``migrate`` (docs/deployment.md: ``replay_owner``, the stack's
``<database>_owner``) makes it here. Where that role may not (it does not own the database,
or the server lacks the contrib package), the migration stops, changes nothing and names the
statement a superuser runs once. The index lives in the project's state only as SQL (the model
does not declare it: SQLite has no GIN), so ``makemigrations`` never sees it.
"""

from __future__ import annotations

from django.db import DatabaseError, migrations, transaction

INDEX = "trace_filename_trgm"

MESSAGE_NO_EXTENSION = (
    "The trace list's search index needs PostgreSQL's pg_trgm extension, and the role "
    "{role!r} may not create it in database {database!r} ({error}). Once, as a superuser, "
    "connected to {database!r}: CREATE EXTENSION IF NOT EXISTS pg_trgm; then run migrate "
    "again (docs/deployment.md)."
)


def _trgm_schema(cursor) -> str | None:
    cursor.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = 'pg_trgm'"
    )
    row = cursor.fetchone()
    return row[0] if row else None


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        schema = _trgm_schema(cursor)
        if schema is None:
            try:
                with transaction.atomic(using=connection.alias):  # a savepoint
                    cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            except DatabaseError as exc:
                cursor.execute("SELECT current_user, current_database()")
                role, database = cursor.fetchone()
                error = str(exc).strip().splitlines()[0]
                raise RuntimeError(
                    MESSAGE_NO_EXTENSION.format(role=role, database=database, error=error)
                ) from exc
            schema = _trgm_schema(cursor)
    # the operator class named by its schema: pg_trgm may live outside the search path
    opclass = f"{schema_editor.quote_name(schema)}.gin_trgm_ops"
    # the expression exactly as ``filename__icontains`` writes it, or the index is not used
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON replay_trace "
        f'USING gin ((UPPER("filename"::text)) {opclass})'
    )


def backwards(apps, schema_editor):
    # the extension stays: other objects may use it, and dropping it needs its owner
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("replay", "0010_trace_index_build"),
    ]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
