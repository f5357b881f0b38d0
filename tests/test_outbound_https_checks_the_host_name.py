"""An https channel's try connects to the address that was checked, yet TLS still names the host: SNI carries it and
the certificate must be issued to it, so pinning the address weakens nothing (a real https server on loopback).
"""
import datetime
import http.server
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from notifications import senders


def certificate(name, tmp_path):
    """A CA, and a server certificate for `name` it signed: (ca.pem, server.pem, server.key)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False).sign(ca_key, hashes.SHA256()))
    paths = [tmp_path / "ca.pem", tmp_path / "server.pem", tmp_path / "server.key"]
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


@pytest.fixture
def https_receiver(tmp_path, monkeypatch):
    ca, cert, key = certificate("hooks.test", tmp_path)
    seen = {"sni": [], "hosts": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen["hosts"].append(self.headers["Host"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.sni_callback = lambda sock, name, ctx: seen["sni"].append(name)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: (
        [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))] if host.endswith(".test") else real(host, *a, **k)))
    monkeypatch.setattr(senders, "tls_context", lambda: ssl.create_default_context(cafile=str(ca)))
    yield port, seen
    server.shutdown()
    server.server_close()


def test_the_host_name_is_sent_and_checked_though_the_address_is_pinned(https_receiver):
    port, seen = https_receiver
    outcome = senders.post(f"https://hooks.test:{port}/hook", b"{}", timeout=5)
    assert outcome.ok and outcome.status_code == 204
    assert seen == {"sni": ["hooks.test"], "hosts": [f"hooks.test:{port}"]}


def test_a_certificate_for_another_name_is_refused(https_receiver):
    port, seen = https_receiver
    outcome = senders.post(f"https://other.test:{port}/hook", b"{}", timeout=5)
    assert not outcome.ok and outcome.detail == "TLS: the server's certificate was not accepted"
    assert seen["hosts"] == []
