"""Model instances from a plain SELECT, for ingest's hot path.

Building an ORM query costs more CPU than PostgreSQL spends answering it (measured: ~0.4 ms
each for the token, the run and its series, of a batch's ~12 ms). A Selection writes the
statement's column list once from the model's fields and makes the instances the way a
queryset does: Model.from_db after the backend's and the fields' converters.
"""
from django.db import connection


class Selection:
    """The concrete fields of `model` (all, or those not in `leave_out`) as a SELECT list, and instances of its rows."""

    def __init__(self, model, leave_out=()):
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if f.attname not in leave_out and f.name not in leave_out]
        self.names = [f.attname for f in self.fields]

    def table(self) -> str:
        return connection.ops.quote_name(self.model._meta.db_table)

    def columns(self) -> str:
        qn = connection.ops.quote_name
        return ", ".join(f"{self.table()}.{qn(f.column)}" for f in self.fields)

    def instances(self, rows) -> list:
        """The model instances of `rows` (values in `self.fields` order); a field left out is deferred."""
        table = self.model._meta.db_table
        converters = []
        for i, field in enumerate(self.fields):
            col = field.get_col(table)
            # As SQLCompiler.apply_converters: the backend's, then the field's.
            found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            if found:
                converters.append((i, col, found))
        made = []
        for row in rows:
            if converters:
                row = list(row)
                for i, col, found in converters:
                    for convert in found:
                        row[i] = convert(row[i], col, connection)
            made.append(self.model.from_db(connection.alias, self.names, row))
        return made
