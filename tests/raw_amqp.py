"""Raw AMQP 1.0 frames over a plain socket, for tests of what no client library would send.

``frame`` encodes one performative (with proton's Data, so the encoding itself is valid) and
``read_until`` reads a connection until a marker arrives or the server closes it.
"""

from __future__ import annotations

import socket

from proton import Data, Described

HEADER = b"AMQP\x00\x01\x00\x00"
BEGIN_CODE = b"\x00\x53\x11"  # a begin performative's descriptor as it appears in a frame


def frame(performative: Described, payload: bytes = b"", channel: int = 0) -> bytes:
    """One AMQP frame (type 0) carrying ``performative`` and, for a transfer, ``payload``."""
    data = Data()
    data.put_object(performative)
    body = data.encode() + payload
    return (8 + len(body)).to_bytes(4, "big") + bytes([2, 0]) + channel.to_bytes(2, "big") + body


def read_until(sock: socket.socket, marker: bytes, received: bytes = b"") -> bytes:
    """Everything read from ``sock`` until ``marker`` is in it or the peer closes (the socket's
    timeout bounds each read), appended to ``received``."""
    while marker not in received and (chunk := sock.recv(65536)):
        received += chunk
    return received
