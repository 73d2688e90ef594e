"""A TLS server certificate served from PEM files and read again when they change, with no restart.

Kubernetes renews the webhook's certificate by updating the Secret mounted into the egs pod
(cert-manager when it renews, ``helm upgrade`` or a GitOps sync that writes a new one); the
kubelet swaps the files in place within about a minute. ``CertificateFiles.server_context``
is the context a listener is made with: at each handshake its SNI callback (called whether or
not the client names a server) looks at the files, at most every ``check_interval`` seconds,
and when they changed loads them into a new context that this and later handshakes use. A pair
that does not load (a key that does not match, a file half written) is logged and the
certificate in use kept, and it is tried again at the next check.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def _load(certfile: str, keyfile: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    return context


class CertificateFiles:
    def __init__(
        self,
        certfile: str,
        keyfile: str,
        *,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        """Loads the pair now: an error here (a missing file, a key that does not match) is the caller's."""
        self.certfile, self.keyfile = certfile, keyfile
        self.check_interval, self.clock = check_interval, clock
        self._seen = self._stamp()
        self._current = _load(certfile, keyfile)
        self._checked = clock()

    def _stamp(self) -> tuple:
        """What changes when either file is replaced or rewritten (the kubelet swaps a symlink)."""
        stamps = []
        for path in (self.certfile, self.keyfile):
            found = os.stat(path)
            stamps.append((found.st_ino, found.st_size, found.st_mtime_ns))
        return tuple(stamps)

    def current(self) -> ssl.SSLContext:
        """The context of the files as they are (as of the last check)."""
        now = self.clock()
        if now - self._checked < self.check_interval:
            return self._current
        self._checked = now
        try:
            stamp = self._stamp()
            if stamp != self._seen:
                self._current = _load(self.certfile, self.keyfile)
                self._seen = stamp
                log.info("webhook certificate %s changed: serving the new one", self.certfile)
        except (OSError, ssl.SSLError) as e:
            log.warning("webhook certificate %s does not load (%s): serving the one before", self.certfile, e)
        return self._current

    def server_context(self) -> ssl.SSLContext:
        """A context for a listener: each handshake is served with ``current()``."""
        context = _load(self.certfile, self.keyfile)

        def pick(connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
            connection.context = self.current()

        context.sni_callback = pick
        return context
