"""Embedding servers for the reliability suite: bring one back on the same port.

The support module starts servers on a free port only; a provider that "comes
back" must be reachable at the address the settings name, so this rebinds the
port the stopped server used (the listening socket sets SO_REUSEADDR).
"""

from __future__ import annotations

import time

from tests.support.embedding_server import (
    EmbeddingServerCore,
    EmbeddingServerHandle,
    _ThreadServer,
)


def start_on_port(port: int, dims: int, timeout: float = 5.0) -> EmbeddingServerHandle:
    """A fresh in-process embedding server listening on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            thread = _ThreadServer(EmbeddingServerCore(dims), port=port)
            return EmbeddingServerHandle(dims, thread=thread, port=thread.port)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
