"""A TLS endpoint in front of the test PostgreSQL: certificates made in the test, a real handshake.

The PostgreSQL that the `pgserver` wheel ships is built without OpenSSL (`pg_config
--configure` has no `--with-ssl`; `ssl = on` makes it refuse to start), so TLS cannot be
switched on in the server itself. `TlsFront` speaks the server's side of PostgreSQL's
TLS negotiation instead, as a server with `ssl = on` does: it answers the client's
SSLRequest with `S`, completes the TLS handshake with a server certificate signed by a
CA generated here (`make_ca`, `issue_server_cert`), and from then on relays the
decrypted protocol to the server's Unix socket. So everything on ktui's side is real:
libpq's `sslmode`, its certificate and host-name verification and its error messages;
only the TLS termination is not PostgreSQL's own code. A client that does not ask for
TLS (`sslmode=disable`) is relayed in clear, as a server with `ssl = on` and a `host`
line in pg_hba.conf allows; `refuse_plain=True` closes such connections instead, as a
`hostssl`-only pg_hba.conf would.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


@dataclass(frozen=True)
class Ca:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    path: Path  # the CA certificate in PEM, what a client's sslrootcert names


@dataclass(frozen=True)
class ServerCert:
    cert_path: Path
    key_path: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca(folder: Path, common: str = "ktui test CA") -> Ca:
    """A self-signed CA certificate (written to folder/<common>.pem) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common)).issuer_name(_name(common))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = folder / f"{common.replace(' ', '-')}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Ca(cert, key, path)


def issue_server_cert(ca: Ca, folder: Path, host: str = "localhost", *, with_ip: bool = True) -> ServerCert:
    """A server certificate for `host` (and 127.0.0.1 unless `with_ip` is False) signed by `ca`;
    key and certificate as PEM files in `folder`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host)).issuer_name(ca.cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(host)] + ([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] if with_ip else [])), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{host}.crt", folder / f"{host}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return ServerCert(cert_path, key_path)


class TlsFront:
    """Listens on 127.0.0.1 (an ephemeral port) on a thread of its own; see the module docstring."""

    def __init__(self, socket_path: Path, server: ServerCert, *, refuse_plain: bool = False):
        self.socket_path = socket_path
        self.refuse_plain = refuse_plain
        self.tls_sessions = 0  # connections that completed the TLS handshake
        self.plain_sessions = 0
        self._ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ctx.load_cert_chain(server.cert_path, server.key_path)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-tls-front", daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0

    def __enter__(self) -> TlsFront:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the TLS front did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readexactly(8)
            if struct.unpack("!II", head)[1] == GSSENC_REQUEST:
                writer.write(b"N")  # no GSSAPI encryption; the client goes on with SSLRequest or a startup
                await writer.drain()
                head = await reader.readexactly(8)
            if struct.unpack("!II", head)[1] == SSL_REQUEST:
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(self._ctx)
                self.tls_sessions += 1
                head = b""
            elif self.refuse_plain:
                writer.close()
                return
            else:
                self.plain_sessions += 1
            up_reader, up_writer = await asyncio.open_unix_connection(str(self.socket_path))
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            writer.close()  # e.g. a client that rejected our certificate hangs up during the handshake
            return
        up_writer.write(head)
        await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            writer.close()
        except (OSError, RuntimeError):
            pass
