"""The emulator over HTTPS, for clients that send bearer tokens only over TLS (client-go: helm, kubectl).

``serve_https(emulator, directory)`` serves it on loopback with a self-signed certificate for
127.0.0.1 and writes a kubeconfig that trusts it: ``(kubeconfig path, CA path)``.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import pathlib
import ssl
from collections.abc import AsyncIterator

import aiohttp.test_utils
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kmock import Server

from .emulator import ClusterEmulator


def self_signed(directory: pathlib.Path, stem: str = "api-server") -> tuple[pathlib.Path, pathlib.Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, valid for an hour, and its key, written
    to ``directory``/``stem``.crt and .key: (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, stem)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def tls_server(context: ssl.SSLContext) -> type[aiohttp.test_utils.RawTestServer]:
    """A kmock server class that serves over TLS with ``context``."""

    class TLSServer(aiohttp.test_utils.RawTestServer):
        async def start_server(self, loop=None, **kwargs) -> None:
            await super().start_server(loop=loop, ssl=context, **kwargs)

    return TLSServer


@contextlib.asynccontextmanager
async def serve_https(emulator: ClusterEmulator, directory: pathlib.Path) -> AsyncIterator[pathlib.Path]:
    """Serve the emulator over HTTPS; yields a kubeconfig (context ``emulated``) with its token and CA."""
    cert, key = self_signed(directory)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with Server(emulator, server_cls=tls_server(context)) as server:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "emulated",
                    "cluster": {"server": f"https://127.0.0.1:{server.port}", "certificate-authority": str(cert)},
                }
            ],
            "users": [{"name": "emulated-admin", "user": {"token": emulator.token}}],
            "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "emulated-admin"}}],
            "current-context": "emulated",
        }
        path = directory / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        yield path
