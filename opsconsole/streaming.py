"""Long exports streamed to slow clients without holding a database connection while they read.

A server-side cursor (`QuerySet.iterator`) keeps its connection until the last row is taken, so a client reading
at 1 KiB every half second held one of the pool's connections for as long as it read, and a few such clients took
the pool from everyone's ingest. Instead, up to SEGMENT rows are read at the database's pace (in the reads' share
of the pool, opsconsole/db.py) into a temporary file, the connection goes back to the pool, and the file is sent at
the client's pace; the next segment is a new query that starts after the last row sent. So a streamed export is
not one snapshot: a record written while it streams is in it if it sorts after the segment being read.
"""
import json
import math
import tempfile

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Q

from opsconsole.db import read_share

CHUNK = 500
# Rows a query reads before its connection goes back (the next query starts after the last): many, since each
# query sorts the remaining rows again; at most some 10 MB of lines wait in a temporary file meanwhile.
SEGMENT = 20_000
SPOOL_IN_MEMORY = 1 << 20
_ENCODER = DjangoJSONEncoder()


def json_line(record) -> bytes:
    """`record` as one JSON line. A sender's free-form JSON (an event's detail) may hold an integer past 64 bits,
    which PostgreSQL keeps exactly and orjson refuses: such a record is written by the standard library instead."""
    try:
        return orjson.dumps(record, default=_ENCODER.default) + b"\n"
    except TypeError:
        return json.dumps(_as_orjson_would(record), cls=DjangoJSONEncoder, separators=(",", ":")).encode() + b"\n"


def _as_orjson_would(value):
    """Non-finite floats as null, as orjson writes them: the fallback's lines read like every other line."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _as_orjson_would(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_as_orjson_would(item) for item in value]
    return value


def segmented_lines(rows, field: str, as_dict, *, chunk: int = CHUNK, segment: int = SEGMENT):
    """One JSON line (bytes) per row of `rows`, which must be ordered by (`field`, id): segments of up to `segment`
    rows, each read `chunk` at a time into a temporary file with the connection given back before its lines are
    yielded. The first segment is one chunk, so the first line leaves at once; segments then double."""
    after, size = None, chunk
    while True:
        page = rows if after is None else rows.filter(Q(**{f"{field}__gt": after[0]}) | Q(**{field: after[0], "id__gt": after[1]}))
        count, size = 0, min(size, segment)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            with read_share():
                for row in page[:size].iterator(chunk_size=chunk):
                    spool.write(json_line(as_dict(row)))
                    count += 1
                    after = (getattr(row, field), row.pk)
            spool.seek(0)
            yield from spool  # one line each: JSON strings hold no raw newline
        if count < size:
            return
        size *= 2
