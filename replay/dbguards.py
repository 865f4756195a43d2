"""Database-level append-only guards: triggers that refuse UPDATE and DELETE (and TRUNCATE).

Used by migrations of every app that owns an append-only table, so the rule holds even for
raw SQL that bypasses the ORM. One function per vendor; the SQL is written here only.
"""

from __future__ import annotations


def append_only_sql(vendor: str, table: str) -> list[str]:
    """Statements that make `table` append-only on `vendor` ("sqlite" or "postgresql")."""
    if vendor == "sqlite":
        return [
            f"""CREATE TRIGGER IF NOT EXISTS {table}_no_update BEFORE UPDATE ON {table}
                BEGIN SELECT RAISE(ABORT, '{table} is append-only: UPDATE refused'); END;""",
            f"""CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
                BEGIN SELECT RAISE(ABORT, '{table} is append-only: DELETE refused'); END;""",
        ]
    if vendor == "postgresql":
        return [
            """CREATE OR REPLACE FUNCTION replay_refuse_rewrite() RETURNS trigger AS $$
               BEGIN
                 RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
                   USING ERRCODE = 'insufficient_privilege';
               END; $$ LANGUAGE plpgsql;""",
            f"DROP TRIGGER IF EXISTS {table}_no_rewrite ON {table};",
            f"""CREATE TRIGGER {table}_no_rewrite BEFORE UPDATE OR DELETE ON {table}
                FOR EACH ROW EXECUTE FUNCTION replay_refuse_rewrite();""",
            f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};",
            f"""CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
                FOR EACH STATEMENT EXECUTE FUNCTION replay_refuse_rewrite();""",
        ]
    raise NotImplementedError(f"no append-only triggers for database vendor {vendor!r}")


def drop_append_only_sql(vendor: str, table: str) -> list[str]:
    """The reverse of append_only_sql (for migrations backwards and tamper tests)."""
    if vendor == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_no_update;",
            f"DROP TRIGGER IF EXISTS {table}_no_delete;",
        ]
    if vendor == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {table}_no_rewrite ON {table};",
            f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};",
        ]
    raise NotImplementedError(f"no append-only triggers for database vendor {vendor!r}")


def migration_operation(table: str):
    """A RunPython operation installing the guards for `table` on whatever vendor migrates."""
    from django.db import migrations

    def forwards(apps, schema_editor):
        for sql in append_only_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(sql, params=None)

    def backwards(apps, schema_editor):
        for sql in drop_append_only_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(sql, params=None)

    return migrations.RunPython(forwards, backwards)


def expiry_only_sql(vendor: str, table: str, columns: tuple[str, ...], column: str) -> list[str]:
    """Narrow `table`'s append-only guard to let exactly one update through: setting `column`
    (a timestamp) once, from NULL, with every other column unchanged. Everything else (any
    other update, a second one, DELETE, TRUNCATE) is still refused.

    `columns` are the other columns (SQLite compares each; PostgreSQL compares the whole row
    but `column`, so a column added later is covered there without a new migration).
    """
    same = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in columns)
    if vendor == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_no_update;",
            f"""CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
                WHEN NOT (OLD.{column} IS NULL AND NEW.{column} IS NOT NULL AND {same})
                BEGIN SELECT RAISE(ABORT, '{table} is append-only: UPDATE refused'); END;""",
            f"""CREATE TRIGGER IF NOT EXISTS {table}_no_delete BEFORE DELETE ON {table}
                BEGIN SELECT RAISE(ABORT, '{table} is append-only: DELETE refused'); END;""",
        ]
    if vendor == "postgresql":
        return [
            f"""CREATE OR REPLACE FUNCTION {table}_expire_only() RETURNS trigger AS $$
               BEGIN
                 IF TG_OP = 'UPDATE' AND OLD.{column} IS NULL AND NEW.{column} IS NOT NULL
                    AND (to_jsonb(NEW) - '{column}') = (to_jsonb(OLD) - '{column}') THEN
                   RETURN NEW;
                 END IF;
                 RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
                   USING ERRCODE = 'insufficient_privilege';
               END; $$ LANGUAGE plpgsql;""",
            f"DROP TRIGGER IF EXISTS {table}_no_rewrite ON {table};",
            f"""CREATE TRIGGER {table}_no_rewrite BEFORE UPDATE OR DELETE ON {table}
                FOR EACH ROW EXECUTE FUNCTION {table}_expire_only();""",
        ]
    raise NotImplementedError(f"no append-only triggers for database vendor {vendor!r}")


def expiry_only_operation(table: str, columns: tuple[str, ...], column: str):
    """A RunPython operation narrowing `table`'s guard (:func:`expiry_only_sql`); backwards,
    the full guard again."""
    from django.db import migrations

    def forwards(apps, schema_editor):
        for sql in expiry_only_sql(schema_editor.connection.vendor, table, columns, column):
            schema_editor.execute(sql, params=None)

    def backwards(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in [*drop_append_only_sql(vendor, table), *append_only_sql(vendor, table)]:
            schema_editor.execute(sql, params=None)

    return migrations.RunPython(forwards, backwards)


def erasure_only_sql(
    vendor: str,
    table: str,
    columns: tuple[str, ...],
    column: str,
    tombstones: dict[str, str] | None = None,
) -> list[str]:
    """Narrow `table`'s append-only guard (installed first, :func:`append_only_sql`) to the
    one update an erasure makes: `column` (a timestamp) set once, from NULL, each column of
    `tombstones` set in the same update to its tombstone (a JSON text: the column holds that
    JSON value afterwards, whatever it held), every other column unchanged. Any other update
    (a second one, a tombstone other than the given one), DELETE and TRUNCATE stay refused.

    `columns` are the unchanged columns (SQLite compares each; PostgreSQL compares the whole
    row but `column` and the tombstoned ones, so a column added later is covered there too).
    """
    tombstones = tombstones or {}
    if vendor == "sqlite":
        same = [f"NEW.{c} IS OLD.{c}" for c in columns]
        became = [f"json(NEW.{c}) IS json('{v}')" for c, v in tombstones.items()]
    elif vendor == "postgresql":
        minus = "".join(f" - '{c}'" for c in (column, *tombstones))
        same = [f"(to_jsonb(NEW){minus}) = (to_jsonb(OLD){minus})"]
        became = [f"NEW.{c} = '{v}'::jsonb" for c, v in tombstones.items()]
    else:
        raise NotImplementedError(f"no append-only triggers for database vendor {vendor!r}")
    condition = " AND ".join([f"OLD.{column} IS NULL", f"NEW.{column} IS NOT NULL", *same, *became])
    if vendor == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_no_update;",
            f"""CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
                WHEN NOT ({condition})
                BEGIN SELECT RAISE(ABORT, '{table} is append-only: UPDATE refused'); END;""",
        ]
    return [
        f"""CREATE OR REPLACE FUNCTION {table}_erase_only() RETURNS trigger AS $$
           BEGIN
             IF TG_OP = 'UPDATE' AND {condition} THEN
               RETURN NEW;
             END IF;
             RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
               USING ERRCODE = 'insufficient_privilege';
           END; $$ LANGUAGE plpgsql;""",
        f"DROP TRIGGER IF EXISTS {table}_no_rewrite ON {table};",
        f"""CREATE TRIGGER {table}_no_rewrite BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {table}_erase_only();""",
    ]


def erasure_only_operation(
    table: str, columns: tuple[str, ...], column: str, tombstones: dict[str, str] | None = None
):
    """A RunPython operation narrowing `table`'s guard to an erasure's update
    (:func:`erasure_only_sql`); backwards, the full guard again."""
    from django.db import migrations

    def forwards(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in erasure_only_sql(vendor, table, columns, column, tombstones):
            schema_editor.execute(sql, params=None)

    def backwards(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in [*drop_append_only_sql(vendor, table), *append_only_sql(vendor, table)]:
            schema_editor.execute(sql, params=None)

    return migrations.RunPython(forwards, backwards)


def decision_only_sql(
    vendor: str,
    table: str,
    *,
    fixed: tuple[str, ...],
    once: tuple[str, ...] = (),
    decision: bool = False,
) -> list[str]:
    """Narrow `table`'s append-only guard (installed first, :func:`append_only_sql`) to the
    updates a decision makes: with ``decision``, ``state`` from ``pending`` to ``approved`` or
    ``rejected`` with ``decision_event_id`` and ``decided_at`` set from NULL; each column of
    ``once`` may go from NULL to a value (or stay as it is). Every column of ``fixed`` must
    stay as it is (SQLite compares each; PostgreSQL compares the whole row but the columns a
    decision sets). DELETE and TRUNCATE stay refused."""
    moving = (*once, *(("state", "decision_event_id", "decided_at") if decision else ()))
    if vendor == "sqlite":
        same = [f"NEW.{c} IS OLD.{c}" for c in fixed]
    elif vendor == "postgresql":
        minus = "".join(f" - '{c}'" for c in moving)
        same = [f"(to_jsonb(NEW){minus}) = (to_jsonb(OLD){minus})"]
    else:
        raise NotImplementedError(f"no append-only triggers for database vendor {vendor!r}")
    distinct = "IS NOT DISTINCT FROM" if vendor == "postgresql" else "IS"
    allowed = [*same, *(f"(OLD.{c} IS NULL OR NEW.{c} {distinct} OLD.{c})" for c in once)]
    if decision:
        allowed += [
            "OLD.state = 'pending'",
            "NEW.state IN ('approved', 'rejected')",
            "OLD.decision_event_id IS NULL",
            "NEW.decision_event_id IS NOT NULL",
            "NEW.decided_at IS NOT NULL",
        ]
    condition = " AND ".join(allowed)
    if vendor == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_no_update;",
            f"""CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table}
                WHEN NOT ({condition})
                BEGIN SELECT RAISE(ABORT, '{table} is append-only: UPDATE refused'); END;""",
        ]
    return [
        f"""CREATE OR REPLACE FUNCTION {table}_decide_only() RETURNS trigger AS $$
           BEGIN
             IF TG_OP = 'UPDATE' AND {condition} THEN
               RETURN NEW;
             END IF;
             RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
               USING ERRCODE = 'insufficient_privilege';
           END; $$ LANGUAGE plpgsql;""",
        f"DROP TRIGGER IF EXISTS {table}_no_rewrite ON {table};",
        f"""CREATE TRIGGER {table}_no_rewrite BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {table}_decide_only();""",
    ]


def decision_only_operation(
    table: str, *, fixed: tuple[str, ...], once: tuple[str, ...] = (), decision: bool = False
):
    """A RunPython operation installing the append-only guard on `table` narrowed to a
    decision's updates (:func:`decision_only_sql`); backwards, it drops the guard."""
    from django.db import migrations

    def forwards(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for sql in [
            *append_only_sql(vendor, table),
            *decision_only_sql(vendor, table, fixed=fixed, once=once, decision=decision),
        ]:
            schema_editor.execute(sql, params=None)

    def backwards(apps, schema_editor):
        for sql in drop_append_only_sql(schema_editor.connection.vendor, table):
            schema_editor.execute(sql, params=None)

    return migrations.RunPython(forwards, backwards)
