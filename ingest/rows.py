"""Model instances from a plain SELECT, for ingest's hot path.

Building an ORM query costs more CPU than PostgreSQL spends answering it (measured: ~0.4 ms
each for the token, the run and its series, of a batch's ~12 ms). A Selection writes the
statement's column list once from the model's fields and makes the instances the way a
queryset does: Model.from_db after the backend's and the fields' converters.
"""
from django.db import DEFAULT_DB_ALIAS, connection, connections


class Selection:
    """The concrete fields of `model` (all, or those not in `leave_out`) as a SELECT list, and instances of its rows."""

    def __init__(self, model, leave_out=()):
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if f.attname not in leave_out and f.name not in leave_out]
        self.names = [f.attname for f in self.fields]
        self._quoted = {}  # vendor -> (table, columns)

    def _quote(self):
        vendor = connection.vendor
        if vendor not in self._quoted:
            qn = connection.ops.quote_name
            table = qn(self.model._meta.db_table)
            self._quoted[vendor] = table, ", ".join(f"{table}.{qn(f.column)}" for f in self.fields)
        return self._quoted[vendor]

    def table(self) -> str:
        return self._quote()[0]

    def columns(self) -> str:
        return self._quote()[1]

    def fetch(self, where: str, params, tail: str = "") -> list:
        """Instances of the rows matching `where` (SQL on this table's columns, `%s` placeholders), `tail`
        (ORDER BY, LIMIT) after it."""
        table, columns = self._quote()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {columns} FROM {table} WHERE {where} {tail}", params)
            return self.instances(cursor.fetchall())

    def instances(self, rows) -> list:
        """The model instances of `rows` (values in `self.fields` order); a field left out is deferred."""
        db = connections[DEFAULT_DB_ALIAS]  # the thread's connection, looked up once (the proxy looks it up each time)
        table = self.model._meta.db_table
        converters = []
        for i, field in enumerate(self.fields):
            col = field.get_col(table)
            # As SQLCompiler.apply_converters: the backend's, then the field's.
            found = db.ops.get_db_converters(col) + col.get_db_converters(db)
            if found:
                converters.append((i, col, found))
        made = []
        from_db, alias, names = self.model.from_db, db.alias, self.names
        for row in rows:
            if converters:
                row = list(row)
                for i, col, found in converters:
                    for convert in found:
                        row[i] = convert(row[i], col, db)
            made.append(from_db(alias, names, row))
        return made
