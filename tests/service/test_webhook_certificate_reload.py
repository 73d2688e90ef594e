"""The webhook's certificate renewed in its files is served without a restart (issue 46, item 7).

Found: the listener loaded its certificate once, at start, so a renewal (cert-manager's, a new Secret
from an upgrade or a GitOps sync) was not served until the egs pod restarted, and the API server,
trusting the new CA, refused the old certificate: with failurePolicy Fail every pod in a slice's
namespace was refused meanwhile. Here a real listener (webhooks.listen) serves one pair, the files are
swapped as the kubelet swaps a Secret's, and the next handshake gets the new certificate; a pair that
does not load keeps the one in use.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pathlib
import shutil
import ssl

import pytest
from tornado import web

from egs_hub.embedded import free_port
from egs_hub.service.handlers import webhooks
from egs_hub.service.tls_files import CertificateFiles

from ..k8s.tls import self_signed

DEADLINE = 10.0


async def served_certificate(port: int) -> bytes:
    """The DER certificate the listener on 127.0.0.1:port presents in a handshake."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        return writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()


def der(cert: pathlib.Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


def swap_in(live: pathlib.Path, cert: pathlib.Path, key: pathlib.Path) -> None:
    """Replace live/tls.crt and live/tls.key by another pair at once, as the kubelet does (a new folder, a
    renamed link)."""
    fresh = live.parent / f"data-{os.urandom(4).hex()}"
    fresh.mkdir()
    shutil.copy(cert, fresh / "tls.crt")
    shutil.copy(key, fresh / "tls.key")
    link = live.parent / "next"
    link.symlink_to(fresh.name)
    os.replace(link, live)


@pytest.fixture
def files(tmp_path):
    first = self_signed(tmp_path, "first")
    second = self_signed(tmp_path, "second")
    data = tmp_path / "data-0"
    data.mkdir()
    shutil.copy(first[0], data / "tls.crt")
    shutil.copy(first[1], data / "tls.key")
    live = tmp_path / "live"
    live.symlink_to(data.name)
    return live, first, second


async def wait_for(condition) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "the listener still serves the old certificate"
        await asyncio.sleep(0.05)


async def test_a_renewed_certificate_is_served_without_a_restart(files):
    live, first, second = files
    port = free_port()
    server = webhooks.listen(web.Application(), port, "127.0.0.1", str(live / "tls.crt"), str(live / "tls.key"))
    try:
        assert await served_certificate(port) == der(first[0])
        swap_in(live, *second)

        async def renewed() -> bool:
            return await served_certificate(port) == der(second[0])

        await wait_for(renewed)
    finally:
        server.stop()


def test_a_pair_that_does_not_load_keeps_the_one_in_use(files, caplog):
    live, first, second = files
    now = [0.0]
    certificate = CertificateFiles(
        str(live / "tls.crt"), str(live / "tls.key"), check_interval=1.0, clock=lambda: now[0]
    )
    before = certificate.current()
    swap_in(live, second[0], first[1])  # the new certificate with the old key
    now[0] = 2.0
    with caplog.at_level(logging.WARNING):
        assert certificate.current() is before
    assert "does not load" in caplog.text
    swap_in(live, *second)  # the whole pair: served from the next check on
    now[0] = 2.5
    assert certificate.current() is before  # not checked again within the interval
    now[0] = 4.0
    assert certificate.current() is not before


def test_files_that_do_not_load_at_start_are_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        CertificateFiles(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
