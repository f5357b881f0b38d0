"""Serve the console (uvicorn, ASGI) on one address, for bin/run.

The socket is bound here, before the application loads, and handed to uvicorn:
a port that another program holds is a one-line error, and once this runs
nobody else can answer on the address bin/run announces (a second server on
the same port would otherwise take the first one's answers as its own).
Only the standard library is imported before serving, so `--check` runs on
any Python, before the virtualenv exists.

    python -m opsconsole.serve --host 127.0.0.1 --port 8000 [--ready FILE] [--check]

`--ready FILE` is written once the console serves on that socket: what bin/run
waits for before it announces the address (an HTTP probe could be answered by
another server on the same port while this one is still loading).
"""
import argparse
import os
import socket
import sys


def bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a restart reuses the port at once
        sock.bind(address)
        # Listening at once makes the port ours: with SO_REUSEADDR a second server could
        # still bind it until one of them listens, and both would find it answering.
        sock.listen(2048)
    except OSError as exc:
        sys.exit(f"bin/run: cannot serve on {host}:{port}: {exc.strerror or exc}")
    return sock


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--ready", help="a file written once the console serves")
    parser.add_argument("--check", action="store_true", help="only check that the address is free")
    args = parser.parse_args(argv)
    sock = bind(args.host, args.port)
    if args.check:
        sock.close()
        return
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets=sockets)
            if self.started and args.ready:
                with open(args.ready, "w") as fh:
                    fh.write(f"{os.getpid()}\n")

    # uvicorn's access log is off: the console writes its own (opsconsole/access_log.py), query secrets redacted.
    # A websocket consumer stuck in channels_redis' receive after its socket closed must not hold a shutdown forever.
    Server(uvicorn.Config("opsconsole.asgi:application", log_level="warning", access_log=False,
                          timeout_graceful_shutdown=10)).run(sockets=[sock])


if __name__ == "__main__":
    main()
