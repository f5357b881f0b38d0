"""Django's PostgreSQL backend, with a pool that hands out only connections that answer.

After a restart, a failover or `pg_terminate_backend`, every idle connection
in the pool is dead while looking fine. Each checkout is checked with
psycopg_pool's own check; the first dead one found means the server dropped
them all, so every idle connection is tested at once (`ConnectionPool.check`)
and the dead ones replaced. (The pool's built-in checkout check — Django's
CONN_HEALTH_CHECKS — backs off a second, then two, four… before each next
candidate: with a pool full of dead connections a request waited many
seconds.) Everything else is Django's backend as is.
"""
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

CHECKOUT_TRIES = 3


def answers(connection) -> bool:
    try:
        ConnectionPool.check_connection(connection)
    except Exception:  # noqa: BLE001 - any failure means this connection is not one to hand out
        return False
    return True


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        if self.pool is None:
            return connection
        for _ in range(CHECKOUT_TRIES - 1):
            if answers(connection):
                break
            self.pool.putconn(connection)  # broken: the pool discards it and opens another
            self.pool.check()
            connection = super().get_new_connection(conn_params)
        return connection
