"""`ktui --store URL` over TLS: real `ktui` processes, libpq's own verification.

A CA and a server certificate for `localhost` are made in the test; the server side of
PostgreSQL's TLS negotiation is `tests/support/pg_tls.py`'s `TlsFront` in front of the
test server (pgserver's PostgreSQL is built without OpenSSL, see there). The URL's
`sslmode` / `sslrootcert` go to libpq unchanged: `require` encrypts without checking the
certificate, `verify-full` checks it against the given CA and the host name, and a wrong
CA fails with a message that names neither the password nor any key or certificate path.
"""

from __future__ import annotations

from urllib.parse import quote

import psycopg
import pytest

from tests.cli.test_cli import Ktui, server  # noqa: F401 - the module's embedding server fixture
from tests.support.pg_tls import TlsFront, issue_server_cert, make_ca

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SECRET = "hunter2-tls-secret"


@pytest.fixture
def tls(tmp_path, postgres_server):
    params = psycopg.conninfo.conninfo_to_dict(postgres_server.url)
    socket_path = f"{params['host']}/.s.PGSQL.{params.get('port') or 5432}"
    certs = tmp_path / "certs"
    certs.mkdir()
    ca = make_ca(certs)
    wrong = make_ca(certs, "another CA")
    server_cert = issue_server_cert(ca, certs)
    with TlsFront(socket_path, server_cert, refuse_plain=True) as front:
        def url(host: str = "localhost", **options: str) -> str:
            query = "&".join(f"{k}={quote(v, safe='/')}" for k, v in options.items())
            return f"postgresql://postgres:{SECRET}@{host}:{front.port}/{params.get('dbname', 'postgres')}?{query}"

        yield front, url, ca, wrong, server_cert


def machine(tmp_path, name, server_url, schema):  # noqa: F811
    ktui = Ktui(tmp_path / name, server_url)
    ktui.config.write_text(ktui.config.read_text(encoding="utf-8") + f'[store]\nschema = "{schema}"\n', encoding="utf-8")
    return ktui


def test_ktui_works_over_tls_with_require_and_verify_full(tmp_path, server, tls, pg_schema):  # noqa: F811
    front, url, ca, _, _ = tls
    one = machine(tmp_path, "one", server.url, pg_schema)
    verified = url(sslmode="verify-full", sslrootcert=str(ca.path))
    outputs = [one("--store", verified, "base", "create", "Team")]
    outputs.append(one("--store", verified, "add", "Team", "--note", "Sea otters hold hands while they sleep.", "--wait"))
    listed = one.json("--store", url(sslmode="require"), "base", "list")
    assert [b["name"] for b in listed["bases"]] == ["Team"]
    found = one.json("--store", url("127.0.0.1", sslmode="verify-full", sslrootcert=str(ca.path)),
                     "search", "Team", "otters")  # the certificate names 127.0.0.1 too
    assert "otters" in found["results"][0]["text"]
    assert front.tls_sessions >= 4
    # the front refuses clear text as a hostssl-only server does: TLS was really in use
    proc = one("--store", url(sslmode="disable"), "base", "list", rc=1)
    outputs.append(proc)
    for proc in outputs:
        assert SECRET not in proc.stdout + proc.stderr


def test_a_wrong_root_certificate_fails_clearly_naming_no_secret(tmp_path, server, tls, pg_schema):  # noqa: F811
    front, url, _, wrong, server_cert = tls
    one = machine(tmp_path, "one", server.url, pg_schema)
    proc = one("--store", url(sslmode="verify-full", sslrootcert=str(wrong.path)), "base", "list", rc=1)
    out = proc.stdout + proc.stderr
    assert "certificate verify failed" in out, out
    assert f"postgres@localhost:{front.port}/" in out  # the server is named, without its password
    assert "Traceback" not in out
    for secret in (SECRET, str(wrong.path), str(server_cert.key_path), str(server_cert.cert_path), "sslrootcert"):
        assert secret not in out, (secret, out)


def test_verify_full_refuses_a_certificate_for_another_host(tmp_path, server, tls, pg_schema, postgres_server):  # noqa: F811
    front, url, ca, _, _ = tls
    elsewhere = issue_server_cert(ca, tmp_path / "certs", "db.elsewhere.example", with_ip=False)
    one = machine(tmp_path, "one", server.url, pg_schema)
    with TlsFront(front.socket_path, elsewhere, refuse_plain=True) as other:
        port = f":{other.port}/"
        wrong_host = url(sslmode="verify-full", sslrootcert=str(ca.path)).replace(f":{front.port}/", port)
        proc = one("--store", wrong_host, "base", "list", rc=1)
        out = proc.stdout + proc.stderr
        assert "localhost" in out and "db.elsewhere.example" in out, out
        for secret in (SECRET, str(ca.path), str(elsewhere.key_path)):
            assert secret not in out, (secret, out)
        # verify-ca checks the chain only: the same certificate is accepted
        one("--store", wrong_host.replace("verify-full", "verify-ca"), "base", "list")
