"""RuleProgress.state is rewritten for every judged series on every batch (a band keeps 5 × window points of
history per phase kind in it, ~10 kB of JSON): PostgreSQL compresses it with lz4 where the server has it,
several times faster to write than the default pglz. Nothing changes on SQLite or in what is stored."""
from django.db import migrations


def _lz4_available(connection):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
    return bool(row and row[0])


def _set_compression(method):
    def apply(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql" or not _lz4_available(connection):
            return
        table = connection.ops.quote_name(apps.get_model("alerts", "RuleProgress")._meta.db_table)
        schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN state SET COMPRESSION {method}")
    return apply


class Migration(migrations.Migration):
    dependencies = [("alerts", "0008_mute_governance")]

    operations = [migrations.RunPython(_set_compression("lz4"), _set_compression("default"))]
