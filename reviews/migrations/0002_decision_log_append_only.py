"""The decision log is append-only below the application: the database refuses UPDATE and DELETE on it.

PostgreSQL: a trigger function raising on each row updated or deleted (TRUNCATE, which only an
administrator or a test database's reset issues, is not a row change and is left to them).
SQLite (the embedded default): BEFORE UPDATE / BEFORE DELETE triggers that abort the statement.
"""
from django.db import migrations

TABLE = "reviews_logentry"
MESSAGE = "the decision log is append-only: write a new entry that corrects this one"

POSTGRES_UP = [
    f"""CREATE OR REPLACE FUNCTION wl_log_entry_append_only() RETURNS trigger AS $$
BEGIN
  RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql""",
    f"CREATE TRIGGER log_entry_no_update BEFORE UPDATE ON {TABLE} FOR EACH ROW EXECUTE FUNCTION wl_log_entry_append_only()",
    f"CREATE TRIGGER log_entry_no_delete BEFORE DELETE ON {TABLE} FOR EACH ROW EXECUTE FUNCTION wl_log_entry_append_only()",
]
POSTGRES_DOWN = [
    f"DROP TRIGGER IF EXISTS log_entry_no_update ON {TABLE}",
    f"DROP TRIGGER IF EXISTS log_entry_no_delete ON {TABLE}",
    "DROP FUNCTION IF EXISTS wl_log_entry_append_only()",
]
SQLITE_UP = [
    f"CREATE TRIGGER IF NOT EXISTS log_entry_no_update BEFORE UPDATE ON {TABLE} BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;",
    f"CREATE TRIGGER IF NOT EXISTS log_entry_no_delete BEFORE DELETE ON {TABLE} BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;",
]
SQLITE_DOWN = ["DROP TRIGGER IF EXISTS log_entry_no_update;", "DROP TRIGGER IF EXISTS log_entry_no_delete;"]


def statements(vendor, up):
    if vendor == "postgresql":
        return POSTGRES_UP if up else POSTGRES_DOWN
    if vendor == "sqlite":
        return SQLITE_UP if up else SQLITE_DOWN
    raise RuntimeError(f"the decision log's append-only triggers are written for PostgreSQL and SQLite, not {vendor}")


def forwards(apps, schema_editor):
    for sql in statements(schema_editor.connection.vendor, up=True):
        schema_editor.execute(sql)


def backwards(apps, schema_editor):
    for sql in statements(schema_editor.connection.vendor, up=False):
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
