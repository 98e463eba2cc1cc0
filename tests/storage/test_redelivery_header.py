"""Redelivered messages carry delivery-count and first-acquirer=false; the bare message is untouched."""

from __future__ import annotations

import proton

from connectors.amqp.translate import with_delivery_count


def test_header_rewritten_bare_message_kept() -> None:
    msg = proton.Message(body="x", durable=True, priority=7, properties={"a": 1}, subject="s")
    msg.first_acquirer = True
    raw = msg.encode()
    out = with_delivery_count(raw, 3)
    again = proton.Message()
    again.decode(out)
    assert again.delivery_count == 3
    assert again.first_acquirer is False
    assert again.durable is True and again.priority == 7
    assert again.properties == {"a": 1} and again.body == "x"
    assert out.endswith(raw[_header_len(raw) :])  # properties .. body unchanged, byte for byte


def test_message_without_header_gets_one() -> None:
    d = proton.Data()
    d.put_object(proton.Described(proton.ulong(0x77), "y"))  # a bare amqp-value section only
    raw = bytes(d.encode())
    out = with_delivery_count(raw, 1)
    again = proton.Message()
    again.decode(out)
    assert again.delivery_count == 1 and again.body == "y"
    assert out.endswith(raw)


def _header_len(raw: bytes) -> int:
    d = proton.Data()
    return d.decode(raw)
