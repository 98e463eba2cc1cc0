"""The AMQP 1.0 workloads, driven with python-qpid-proton against any broker URL.

Four workloads, each one ``proton.reactor.Container`` run in this process, each bounded by a
deadline after which it closes its connection and returns what it has (``timed_out`` true):

* ``publish_throughput``: durable 1 KB messages on an unsettled sender link, at most ``window``
  unacknowledged; a message counts once the broker's ``accepted`` disposition has arrived.
* ``latency_at_rate``: a publisher at a steady rate plus one subscriber on the same connection;
  publish->delivery and publish->accepted times from ``time.perf_counter_ns`` (one process, one
  clock). The send time also travels in the application property ``bench_sent_ns``.
* ``fanout_deliver``: N subscribers attach, then K messages are published; returns when every
  subscriber has all K.
* ``consume_backlog``: N receivers, each on its own connection, drain a pre-loaded subscription
  (or queue), accepting every delivery; ``create_subscription`` makes the durable subscription
  beforehand (attach, then detach without closing).
* ``publish_at_rate``: a paced publisher spread round-robin over several addresses (one sender
  link each, one connection), for a set time; nothing is received.

Every body is fresh random bytes, so nothing downstream can compress or deduplicate it.
Messages are encoded before the workload starts; only the send time is written at send time
(``publish_at_rate`` encodes each as it goes: a run of minutes would hold them all).
"""

from __future__ import annotations

import math
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from proton import Data, Message, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container, Handler, LinkOption

CpuProbe = Callable[[], "float | None"]
# Extra application properties of message ``seq`` (e.g. for selectors to match on).
PropsFn = Callable[[int], dict[str, Any]]


class _Call(Handler):
    """A timer task that calls ``fn``."""

    def __init__(self, fn: Callable[[], None]) -> None:
        super().__init__()
        self._fn = fn

    def on_timer_task(self, event: Any) -> None:
        self._fn()


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Return the ``q`` quantile (0..1) of already sorted values by linear interpolation."""
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    if pos == lo:
        return sorted_values[lo]
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


# Stand-in for the send time while a message is encoded; replaced in place when it is sent.
_STAMP_PLACEHOLDER = struct.pack(">q", 0x7EADBEEFCAFEBA5E)


class _Encoded:
    """One message encoded ahead of time, so encoding costs stay out of the timed part.

    The send time (``perf_counter_ns``) is written into the application property
    ``bench_sent_ns`` (an AMQP long) just before the bytes go out.
    """

    __slots__ = ("data", "stamp_at")

    def __init__(self, seq: int, size: int, props: PropsFn | None = None) -> None:
        properties = dict(props(seq)) if props is not None else {}
        properties.update({"bench_seq": seq, "bench_sent_ns": struct.unpack(">q", _STAMP_PLACEHOLDER)[0]})
        msg = Message(body=os.urandom(size), durable=True, properties=properties)
        self.data = bytearray(msg.encode())
        self.stamp_at = self.data.find(_STAMP_PLACEHOLDER)
        if self.stamp_at < 0:
            msg = "encoded message does not contain the send-time placeholder"
            raise RuntimeError(msg)

    def send(self, sender: Any, tag: str) -> int:
        """Stamp, send as one unsettled delivery; return the send time in ns."""
        now = time.perf_counter_ns()
        struct.pack_into(">q", self.data, self.stamp_at, now)
        sender.delivery(tag)
        sender.stream(self.data)
        sender.advance()
        return now


def encode_messages(count: int, size: int, props: PropsFn | None = None, first_seq: int = 0) -> list[_Encoded]:
    """Encode ``count`` durable messages with fresh random bodies of ``size`` bytes (and the
    application properties ``props(seq)``, if given), stamped ``bench_seq`` from ``first_seq``."""
    return [_Encoded(seq, size, props) for seq in range(first_seq, first_seq + count)]


class _Workload(MessagingHandler):
    """Connection, deadline and clean shutdown shared by the workloads."""

    def __init__(
        self, url: str, *, timeout_s: float, prefetch: int = 0, auto_accept: bool = True,
        connect_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(prefetch=prefetch, auto_accept=auto_accept, auto_settle=True)
        self.url = url
        # Extra keyword arguments of Container.connect: user, password, allowed_mechs, ssl_domain...
        self.connect_options = connect_options or {}
        self.timeout_s = timeout_s
        self.timed_out = False
        self.errors: list[str] = []
        self.done = False
        self._container: Container | None = None
        self._conn: Any = None
        self._deadline: Any = None
        self._grace: Any = None

    def on_start(self, event: Any) -> None:
        self._container = event.container
        self._conn = event.container.connect(self.url, reconnect=False, **self.connect_options)
        self._deadline = event.container.schedule(self.timeout_s, _Call(self._on_deadline))
        self.open_links(event.container, self._conn)

    def open_links(self, container: Container, conn: Any) -> None:
        raise NotImplementedError

    def _on_deadline(self) -> None:
        self._deadline = None
        if not self.done:
            self.timed_out = True
            self.finish()

    def finish(self) -> None:
        """Close the connection (not the links: RabbitMQ's plugin answers a closing detach badly)."""
        if self.done:
            return
        self.done = True
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._conn is not None:
            self._conn.close()
        # If the peer never answers the close, stop the reactor anyway.
        self._grace = self._container.schedule(5.0, _Call(self._container.stop))

    def _closed(self) -> None:
        if not self.done:
            self.errors.append("connection closed by the peer before the workload finished")
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.done = True
        # Without this the reactor idles for its default 3.14 s select timeout before returning.
        if self._container is not None:
            self._container.stop()

    def on_connection_closed(self, event: Any) -> None:
        self._closed()

    def on_transport_closed(self, event: Any) -> None:
        self._closed()

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.errors.append(f"transport: {cond.name if cond else ''} {cond.description if cond else ''}".strip())
        self._closed()

    def on_connection_error(self, event: Any) -> None:
        cond = event.connection.remote_condition
        self.errors.append(f"connection: {cond.name} {cond.description}" if cond else "connection closed by peer")
        self.finish()

    def on_link_closing(self, event: Any) -> None:
        # Only the peer closes links here (the workloads close the whole connection).
        self.errors.append(f"link {event.link.name} detached by the peer")
        self.finish()

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.errors.append(f"link {event.link.name}: {cond.name} {cond.description}" if cond else "link closed")
        self.finish()

    def on_rejected(self, event: Any) -> None:
        cond = event.delivery.remote.condition
        self.errors.append(f"rejected: {cond.name} {cond.description}" if cond else "rejected")

    def on_released(self, event: Any) -> None:
        self.errors.append("released")


class _PublishThroughput(_Workload):
    def __init__(
        self, url: str, address: str, *, warmup: int, count: int, window: int, size: int,
        timeout_s: float, cpu_probe: CpuProbe, connect_options: dict[str, Any] | None = None, first_seq: int = 0,
    ) -> None:
        super().__init__(url, timeout_s=timeout_s, connect_options=connect_options)
        self.address = address
        self.warmup, self.count, self.window, self.size = warmup, count, window, size
        self.total = warmup + count
        self.messages = encode_messages(self.total, size, first_seq=first_seq)
        self.sent = self.accepted = self.not_accepted = 0
        self.t_start = self.t_measure = self.t_end = None
        self.cpu_probe = cpu_probe
        self.self_cpu: list[float] = []
        self.broker_cpu: list[float | None] = []
        self.sender: Any = None

    def open_links(self, container: Container, conn: Any) -> None:
        self.sender = container.create_sender(conn, self.address)

    def _mark(self) -> None:
        self.self_cpu.append(os.times().user + os.times().system)
        self.broker_cpu.append(self.cpu_probe())

    def on_sendable(self, event: Any) -> None:
        self._pump()

    def _pump(self) -> None:
        s = self.sender
        if self.done:
            return
        if self.t_start is None:
            self.t_start = time.perf_counter()
            if self.warmup == 0:
                self.t_measure = self.t_start
                self._mark()
        while s.credit > 0 and self.sent < self.total and self.sent - self._settled() < self.window:
            self.messages[self.sent].send(s, str(self.sent))
            self.sent += 1

    def _settled(self) -> int:
        return self.accepted + self.not_accepted

    def _on_outcome(self) -> None:
        if self.accepted == self.warmup and self.t_measure is None:
            self.t_measure = time.perf_counter()
            self._mark()
        if self._settled() >= self.total:
            self.t_end = time.perf_counter()
            self._mark()
            self.finish()
        else:
            self._pump()

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        self._on_outcome()

    def on_rejected(self, event: Any) -> None:
        super().on_rejected(event)
        self.not_accepted += 1
        self._on_outcome()

    def on_released(self, event: Any) -> None:
        super().on_released(event)
        self.not_accepted += 1
        self._on_outcome()

    def on_modified(self, event: Any) -> None:
        self.errors.append("modified")
        self.not_accepted += 1
        self._on_outcome()


def publish_throughput(
    url: str, address: str, *, warmup: int, count: int, window: int = 1000, size: int = 1024,
    timeout_s: float = 120.0, cpu_probe: CpuProbe = lambda: None, connect_options: dict[str, Any] | None = None,
    first_seq: int = 0,
) -> dict[str, Any]:
    """Publish ``warmup + count`` durable messages; time the last ``count`` accepted ones.

    ``connect_options``: extra arguments of ``Container.connect`` (credentials, SASL
    mechanisms, an ``SSLDomain`` for amqps URLs; bench/tls_cost.py). ``first_seq``: the first
    ``bench_seq`` stamped (publishers to one subscription through several front ends stamp
    ranges of their own).

    Returns:
        ``msgs_per_s`` over the measured part (or over what was accepted after warm-up when
        the deadline hit, with ``timed_out`` true), counts, client and broker CPU seconds.
    """
    h = _PublishThroughput(
        url, address, warmup=warmup, count=count, window=window, size=size,
        timeout_s=timeout_s, cpu_probe=cpu_probe, connect_options=connect_options, first_seq=first_seq,
    )
    t0 = time.perf_counter()
    Container(h).run()
    wall = time.perf_counter() - t0
    measured = max(0, h.accepted - h.warmup)
    end = h.t_end if h.t_end is not None else time.perf_counter()
    rate = None
    if h.t_measure is not None and measured > 0:
        rate = measured / (end - h.t_measure)
    out: dict[str, Any] = {
        "msgs_per_s": rate,
        "measured_accepted": measured,
        "measured_s": (end - h.t_measure) if h.t_measure is not None else None,
        "sent": h.sent,
        "accepted": h.accepted,
        "not_accepted": h.not_accepted,
        "wall_s": wall,
        "timed_out": h.timed_out,
        "errors": h.errors[:10],
        "error_count": len(h.errors),
    }
    if len(h.self_cpu) == 2:
        out["client_cpu_s"] = h.self_cpu[1] - h.self_cpu[0]
        if None not in h.broker_cpu:
            out["broker_cpu_s"] = h.broker_cpu[1] - h.broker_cpu[0]
    return out


class _LatencyAtRate(_Workload):
    def __init__(
        self, url: str, pub_address: str, sub_address: str, *, rate: float, warmup_s: float,
        duration_s: float, drain_s: float, size: int, window: int, prefetch: int, timeout_s: float,
        cpu_probe: CpuProbe, tick_s: float, props: PropsFn | None = None,
    ) -> None:
        super().__init__(url, timeout_s=timeout_s, prefetch=prefetch)
        self.pub_address, self.sub_address = pub_address, sub_address
        self.rate, self.warmup_s, self.duration_s, self.drain_s = rate, warmup_s, duration_s, drain_s
        self.size, self.window = size, window
        self.tick_s = tick_s
        self.props = props
        self.messages = encode_messages(int(rate * (warmup_s + duration_s)) + 100, size, props)
        self.sender: Any = None
        self.receiver: Any = None
        self.opened: set[str] = set()
        self.t_attached_ns = self.t_flowing_ns = 0
        self.probes = self.probe_accepts = 0
        self.t0_ns = self.t_measure_ns = self.t_stop_ns = 0
        self.sent = self.accepted = self.not_accepted = 0
        self.sent_ns: list[int] = []
        self.measured: set[int] = set()
        self.measured_delivered = self.measured_accepted = 0
        self.deliver_ns: dict[int, int] = {}
        self.accept_ns: dict[int, int] = {}
        self.duplicates = self.foreign = self.unstamped = 0
        self.credit_stalls = 0
        self.sending = False
        self.drain_task: Any = None
        self.cpu_probe = cpu_probe
        self.cpu_marks: list[tuple[float, float | None]] = []

    def open_links(self, container: Container, conn: Any) -> None:
        self.receiver = container.create_receiver(conn, self.sub_address, name="bench-latency-sub")
        self.sender = container.create_sender(conn, self.pub_address, name="bench-latency-pub")

    def on_link_opened(self, event: Any) -> None:
        self.opened.add(event.link.name)
        if len(self.opened) == 2 and self.t_attached_ns == 0:
            self.t_attached_ns = time.perf_counter_ns()
            self._probe()

    def _probe(self) -> None:
        # Until one probe has come through, the subscription may not be flowing yet (a new
        # subscription can take seconds to start); that time is reported, not measured.
        if self.done or self.t0_ns:
            return
        if self.sender.credit > 0:
            probe = Message(body=b"probe", durable=True, properties={"bench_probe": self.probes})
            self.sender.send(probe, tag=f"probe-{self.probes}")
            self.probes += 1
        self._container.schedule(0.1, _Call(self._probe))

    def _start_rate(self) -> None:
        self.t_flowing_ns = time.perf_counter_ns()
        self.sending = True
        self.t0_ns = time.perf_counter_ns()
        self.t_measure_ns = self.t0_ns + int(self.warmup_s * 1e9)
        self.t_stop_ns = self.t_measure_ns + int(self.duration_s * 1e9)
        self._tick()

    def _tick(self) -> None:
        if self.done or not self.sending:
            return
        now = time.perf_counter_ns()
        if self.t_measure_ns <= now and not self.cpu_marks:
            self.cpu_marks.append((os.times().user + os.times().system, self.cpu_probe()))
        if now >= self.t_stop_ns:
            self.sending = False
            self.cpu_marks.append((os.times().user + os.times().system, self.cpu_probe()))
            self._maybe_done()
            if not self.done:
                self.drain_task = self._container.schedule(self.drain_s, _Call(self.finish))
            return
        due = (now - self.t0_ns) * self.rate / 1e9
        s = self.sender
        while self.sent < due:
            if s.credit <= 0 or self.sent - self.accepted - self.not_accepted >= self.window:
                self.credit_stalls += 1
                break
            if self.sent >= len(self.messages):
                self.messages.append(_Encoded(self.sent, self.size, self.props))
            t = self.messages[self.sent].send(s, str(self.sent))
            self.sent_ns.append(t)
            if self.t_measure_ns <= t < self.t_stop_ns:
                self.measured.add(self.sent)
            self.sent += 1
        self._container.schedule(self.tick_s, _Call(self._tick))

    def _maybe_done(self) -> None:
        if self.sending or self.done or not self.t0_ns:
            return
        if self.measured_delivered == len(self.measured) and self.measured_accepted == len(self.measured):
            if self.drain_task is not None:
                self.drain_task.cancel()
            self.finish()

    def on_accepted(self, event: Any) -> None:
        if event.link is not self.sender and event.link.name != "bench-latency-pub":
            return
        now = time.perf_counter_ns()
        if event.delivery.tag.startswith("probe-"):
            self.probe_accepts += 1
            return
        seq = int(event.delivery.tag)
        self.accepted += 1
        self.accept_ns[seq] = now - self.sent_ns[seq]
        if seq in self.measured:
            self.measured_accepted += 1
        if not self.sending:
            self._maybe_done()

    def on_rejected(self, event: Any) -> None:
        super().on_rejected(event)
        if not event.delivery.tag.startswith("probe-"):
            self.not_accepted += 1

    def on_released(self, event: Any) -> None:
        super().on_released(event)
        if not event.delivery.tag.startswith("probe-"):
            self.not_accepted += 1

    def on_message(self, event: Any) -> None:
        now = time.perf_counter_ns()
        props = event.message.properties or {}
        if "bench_probe" in props:
            if not self.t0_ns:
                self._start_rate()
            return
        seq, sent = props.get("bench_seq"), props.get("bench_sent_ns")
        if seq is None or sent is None:
            self.unstamped += 1
            return
        seq = int(seq)
        if seq >= self.sent or self.sent_ns[seq] != int(sent):
            self.foreign += 1  # not from this run (e.g. left in the queue by an earlier one)
            return
        if seq in self.deliver_ns:
            self.duplicates += 1
            return
        self.deliver_ns[seq] = now - int(sent)
        if seq in self.measured:
            self.measured_delivered += 1
        if not self.sending:
            self._maybe_done()


def _ms_stats(prefix: str, values_ns: list[int], expected: int) -> dict[str, Any]:
    """Percentiles over all ``expected`` messages, the ones that never arrived counting as later
    than any that did: a percentile that falls among them is None (unknown, beyond the drain)."""
    v = sorted(x / 1e6 for x in values_ns)
    missing = max(0, expected - len(v))
    full = v + [math.inf] * missing

    def q(p: float) -> float | None:
        value = percentile(full, p)
        return None if value is None or not math.isfinite(value) else value

    return {
        f"{prefix}_p50_ms": q(0.50),
        f"{prefix}_p99_ms": q(0.99),
        f"{prefix}_max_ms": None if missing or not v else v[-1],
        f"{prefix}_mean_ms": sum(v) / len(v) if v and not missing else None,
        f"{prefix}_n": len(v),
    }


def latency_at_rate(
    url: str, pub_address: str, sub_address: str, *, rate: float = 1000.0, warmup_s: float = 1.0,
    duration_s: float = 10.0, drain_s: float = 10.0, size: int = 1024, window: int = 1000,
    prefetch: int = 100, timeout_s: float = 120.0, cpu_probe: CpuProbe = lambda: None, tick_s: float = 0.001,
    props: PropsFn | None = None,
) -> dict[str, Any]:
    """Publish at ``rate`` msg/s while one subscriber receives; return latency percentiles.

    After both links attach, a small probe message goes out every 100 ms until one is
    delivered (``subscription_flowing_s``); only then does the steady publishing start.
    Only messages sent in the ``duration_s`` window after ``warmup_s`` count. After the last
    send, deliveries and dispositions have ``drain_s`` to arrive; measured messages still
    missing then are reported as ``missing_deliveries``/``missing_accepts``. ``props(seq)`` adds
    application properties to message ``seq`` (for other subscribers' selectors).
    """
    h = _LatencyAtRate(
        url, pub_address, sub_address, rate=rate, warmup_s=warmup_s, duration_s=duration_s,
        drain_s=drain_s, size=size, window=window, prefetch=prefetch, timeout_s=timeout_s,
        cpu_probe=cpu_probe, tick_s=tick_s, props=props,
    )
    t0 = time.perf_counter()
    Container(h).run()
    wall = time.perf_counter() - t0
    measured = sorted(h.measured)
    deliver = [h.deliver_ns[s] for s in measured if s in h.deliver_ns]
    accept = [h.accept_ns[s] for s in measured if s in h.accept_ns]
    by_second: dict[int, list[float]] = {}
    for seq in measured:
        if seq in h.deliver_ns:
            second = (h.sent_ns[seq] - h.t_measure_ns) // 1_000_000_000
            by_second.setdefault(second, []).append(h.deliver_ns[seq] / 1e6)
    out: dict[str, Any] = {
        **_ms_stats("e2e", deliver, len(measured)),
        **_ms_stats("accepted", accept, len(measured)),
        # p50 of the messages sent in each second of the window: shows a trend or a transient.
        "e2e_p50_ms_by_second": [round(percentile(sorted(v), 0.5), 2) for _, v in sorted(by_second.items())],
        "subscription_flowing_s": (h.t_flowing_ns - h.t_attached_ns) / 1e9 if h.t_flowing_ns else None,
        "probes_sent": h.probes,
        "measured_sent": len(measured),
        "achieved_rate": len(measured) / duration_s if duration_s else None,
        "missing_deliveries": len(measured) - len(deliver),
        "missing_accepts": len(measured) - len(accept),
        "sent": h.sent,
        "duplicates": h.duplicates,
        "foreign_messages": h.foreign,
        "unstamped_messages": h.unstamped,
        "credit_stalls": h.credit_stalls,
        "wall_s": wall,
        "timed_out": h.timed_out,
        "errors": h.errors[:10],
        "error_count": len(h.errors),
    }
    if len(h.cpu_marks) == 2:
        (c0, b0), (c1, b1) = h.cpu_marks
        out["client_cpu_s"] = c1 - c0
        if b0 is not None and b1 is not None:
            out["broker_cpu_s"] = b1 - b0
    return out


class _FanoutDeliver(_Workload):
    def __init__(
        self, url: str, pub_address: str, sub_address: str, *, subscribers: int, count: int, size: int,
        window: int, prefetch: int, timeout_s: float,
    ) -> None:
        super().__init__(url, timeout_s=timeout_s, prefetch=prefetch)
        self.pub_address, self.sub_address = pub_address, sub_address
        self.n, self.count, self.size, self.window = subscribers, count, size, window
        self.messages = encode_messages(count, size)
        self.receivers: dict[str, set[int]] = {}
        self.opened_receivers = 0
        self.sender: Any = None
        self.sent = self.accepted = self.not_accepted = 0
        self.complete = 0
        self.t_attached = self.t_published = self.t_first = self.t_all = None

    def open_links(self, container: Container, conn: Any) -> None:
        for i in range(self.n):
            name = f"bench-fanout-sub-{i}"
            self.receivers[name] = set()
            container.create_receiver(conn, self.sub_address, name=name)

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            self.opened_receivers += 1
            if self.opened_receivers == self.n:
                self.t_attached = time.perf_counter()
                self.sender = self._container.create_sender(self._conn, self.pub_address, name="bench-fanout-pub")

    def on_sendable(self, event: Any) -> None:
        self._pump()

    def _pump(self) -> None:
        s = self.sender
        while (
            not self.done and s.credit > 0 and self.sent < self.count
            and self.sent - self.accepted - self.not_accepted < self.window
        ):
            self.messages[self.sent].send(s, str(self.sent))
            self.sent += 1

    def on_accepted(self, event: Any) -> None:
        if event.link.is_receiver:
            return
        self.accepted += 1
        if self.accepted == self.count:
            self.t_published = time.perf_counter()
        self._pump()

    def on_rejected(self, event: Any) -> None:
        super().on_rejected(event)
        self.not_accepted += 1
        self._pump()

    def on_released(self, event: Any) -> None:
        super().on_released(event)
        self.not_accepted += 1
        self._pump()

    def on_message(self, event: Any) -> None:
        if self.t_first is None:
            self.t_first = time.perf_counter()
        seq = (event.message.properties or {}).get("bench_seq")
        got = self.receivers[event.link.name]
        if seq is None or len(got) >= self.count:
            return
        before = len(got)
        got.add(int(seq))
        if len(got) == self.count and before < self.count:
            self.complete += 1
            if self.complete == self.n:
                self.t_all = time.perf_counter()
                self.finish()


def fanout_deliver(
    url: str, pub_address: str, sub_address: str, *, subscribers: int, count: int, size: int = 1024, window: int = 1000,
    prefetch: int = 100, timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Attach ``subscribers`` receivers on ``sub_address``, publish ``count`` messages, wait for all.

    Returns:
        whether every subscriber got every message, the per-subscriber minimum, and timings
        (attach, publish, first delivery, all delivered) in seconds from the start.
    """
    h = _FanoutDeliver(
        url, pub_address, sub_address, subscribers=subscribers, count=count, size=size, window=window,
        prefetch=prefetch, timeout_s=timeout_s,
    )
    t0 = time.perf_counter()
    Container(h).run()
    wall = time.perf_counter() - t0
    got = [len(v) for v in h.receivers.values()]

    def rel(t: float | None) -> float | None:
        return None if t is None else t - t0

    return {
        "all_delivered": h.complete == subscribers,
        "subscribers_complete": h.complete,
        "min_received": min(got) if got else 0,
        "sent": h.sent,
        "accepted": h.accepted,
        "not_accepted": h.not_accepted,
        "t_attached_s": rel(h.t_attached),
        "t_published_s": rel(h.t_published),
        "t_first_delivery_s": rel(h.t_first),
        "t_all_delivered_s": rel(h.t_all),
        "wall_s": wall,
        "timed_out": h.timed_out,
        "errors": h.errors[:10],
        "error_count": len(h.errors),
    }


# --------------------------------------------------------------------------- consume (shared subscription)


def shared_durable_link_name(subscription: str) -> str:
    """Link name of a global JMS 2.0 shared durable consumer (as Qpid JMS names the first
    consumer of ``subscription`` on a connection without a ClientID)."""
    return f"{subscription}|global"


def shared_durable_source(link: Any) -> None:
    """Set ``link``'s source terminus as a Qpid JMS global shared durable consumer does:
    capabilities ``topic``, ``shared``, ``global``; durable unsettled-state; expiry never."""
    src = link.source
    src.capabilities.put_array(False, Data.SYMBOL)
    src.capabilities.enter()
    for cap in ("topic", "shared", "global"):
        src.capabilities.put_symbol(cap)
    src.capabilities.exit()
    src.durability = Terminus.DELIVERIES
    src.expiry_policy = Terminus.EXPIRE_NEVER


class SourceSetup(LinkOption):
    """A link option that runs ``fn(link)`` before the attach goes out."""

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self._fn = fn

    def apply(self, link: Any) -> None:
        self._fn(link)


class _CreateSubscription(MessagingHandler):
    """Attach one consumer without credit, then detach it (closed=false): a durable
    subscription outlives the detach, as when a JMS application closes its shared consumer."""

    def __init__(self, url: str, address: str, link_name: str, configure: Callable[[Any], None]) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.address, self.link_name, self.configure = url, address, link_name, configure
        self.attached = self.detached = False
        self.remote_source_address: str | None = None
        self.errors: list[str] = []
        self._conn: Any = None

    def on_start(self, event: Any) -> None:
        self._conn = event.container.connect(self.url, reconnect=False)
        event.container.create_receiver(self._conn, self.address, name=self.link_name,
                                        options=SourceSetup(self.configure))

    def on_link_opened(self, event: Any) -> None:
        self.remote_source_address = event.link.remote_source.address
        self.attached = self.remote_source_address is not None
        event.link.detach()

    def on_link_remote_detach(self, event: Any) -> None:
        self.detached = True
        self._conn.close()

    def on_link_error(self, event: Any) -> None:
        cond = event.link.remote_condition
        self.errors.append(f"{cond.name} {cond.description}" if cond else "link closed by the peer")
        self._conn.close()

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.errors.append(f"transport: {cond.name if cond else ''} {cond.description if cond else ''}".strip())

    def on_connection_closed(self, event: Any) -> None:
        event.container.stop()


def create_subscription(url: str, address: str, link_name: str, configure: Callable[[Any], None],
                        timeout_s: float = 60.0) -> dict[str, Any]:
    """Create a durable subscription by attaching one consumer and detaching it (not closing).

    Returns ``attached``/``detached`` flags, seconds taken and errors. Raises ``RuntimeError``
    when the attach was refused or the broker did not answer the detach within ``timeout_s``.
    """
    h = _CreateSubscription(url, address, link_name, configure)
    c = Container(h)
    c.schedule(timeout_s, _Call(c.stop))
    t0 = time.perf_counter()
    c.run()
    out = {"attached": h.attached, "detached": h.detached, "create_s": time.perf_counter() - t0,
           "errors": h.errors[:5]}
    if not (h.attached and h.detached) or h.errors:
        msg = f"creating subscription {link_name!r} on {address!r} failed: {out}"
        raise RuntimeError(msg)
    return out


def _missing_range(seen: set[int], count: int) -> dict[str, Any] | None:
    """The lowest and highest ``bench_seq`` below ``count`` not in ``seen``, and the first few."""
    missing = [s for s in range(count) if s not in seen]
    return {"lowest": missing[0], "highest": missing[-1], "first": missing[:5]} if missing else None


class _ConsumeBacklog(_Workload):
    """``consumers`` receivers on a pre-loaded subscription, each on its own connection.

    No credit is granted until every link has attached; then each gets ``prefetch`` and one
    more per message it accepts (a window of ``prefetch`` unsettled deliveries per consumer).
    """

    def __init__(
        self, url: str, address: str, *, consumers: int, count: int, prefetch: int, link_name: str,
        configure: Callable[[Any], None] | None, timeout_s: float, cpu_probe: CpuProbe, urls: Sequence[str] = (),
    ) -> None:
        super().__init__(url, timeout_s=timeout_s, prefetch=0, auto_accept=False)  # accepted in on_message
        self.urls = list(urls) or [url]
        self.address, self.n, self.count, self.prefetch = address, consumers, count, prefetch
        self.link_name, self.configure = link_name, configure
        self.conns: list[Any] = []
        self.receivers: list[Any] = []
        self.closed_conns = 0
        self.opened = 0
        self.per_consumer = [0] * consumers  # deliveries accepted by each consumer (duplicates included)
        self.per_consumer_first = [0] * consumers  # distinct messages each was the first to accept
        self.seen: set[int] = set()
        self.duplicates = self.redelivered = self.unstamped = 0
        self.t_connect = self.t_attached = self.t_first = self.t_done = None
        self.cpu_probe = cpu_probe
        self.marks: list[tuple[float, float | None]] = []

    def on_start(self, event: Any) -> None:
        c = self._container = event.container
        self._deadline = c.schedule(self.timeout_s, _Call(self._on_deadline))
        self.t_connect = time.perf_counter()
        options = SourceSetup(self.configure) if self.configure is not None else None
        for i in range(self.n):
            conn = c.connect(self.urls[i % len(self.urls)], reconnect=False)
            rcv = c.create_receiver(conn, self.address, name=self.link_name, options=options)
            rcv.bench_consumer = i  # stored in the link's record: the same on every event
            self.conns.append(conn)
            self.receivers.append(rcv)

    def on_link_opened(self, event: Any) -> None:
        if event.link.remote_source.address is None:
            return  # a refusal: the detach that follows ends the run through on_link_error
        self.opened += 1
        if self.opened == self.n:
            self.t_attached = time.perf_counter()
            self._mark()
            for rcv in self.receivers:
                rcv.flow(self.prefetch)

    def _mark(self) -> None:
        self.marks.append((os.times().user + os.times().system, self.cpu_probe()))

    def on_message(self, event: Any) -> None:
        now = time.perf_counter()
        dlv = event.delivery
        self.accept(dlv)
        link = event.link
        if not self.done:
            link.flow(1)
        if self.t_first is None:
            self.t_first = now
            self._mark()
        i = link.bench_consumer
        self.per_consumer[i] += 1
        if event.message.delivery_count:
            self.redelivered += 1
        seq = (event.message.properties or {}).get("bench_seq")
        if seq is None:
            self.unstamped += 1
            return
        if seq in self.seen:
            self.duplicates += 1
            return
        self.seen.add(seq)
        self.per_consumer_first[i] += 1
        if len(self.seen) == self.count and self.t_done is None:
            self.t_done = time.perf_counter()
            self._mark()
            self.finish()

    def finish(self) -> None:
        """Close every connection (unsettled deliveries, if any, go back to the subscription)."""
        if self.done:
            return
        self.done = True
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        for conn in self.conns:
            conn.close()
        self._grace = self._container.schedule(5.0, _Call(self._container.stop))

    def _closed(self) -> None:
        self.closed_conns += 1
        if not self.done:
            self.errors.append("a connection closed before the workload finished")
            self.finish()
        if self.closed_conns >= self.n:
            if self._grace is not None:
                self._grace.cancel()
                self._grace = None
            self._container.stop()

    def on_connection_closed(self, event: Any) -> None:
        self._closed()

    def on_transport_closed(self, event: Any) -> None:
        pass  # counted once, in on_connection_closed (or on_transport_error when the socket broke)


def consume_backlog(
    url: str, address: str, *, consumers: int, count: int, prefetch: int = 100, link_name: str,
    configure: Callable[[Any], None] | None = None, timeout_s: float = 300.0,
    cpu_probe: CpuProbe = lambda: None, urls: Sequence[str] = (),
) -> dict[str, Any]:
    """Drain ``count`` pre-loaded messages (stamped ``bench_seq`` 0..count-1) from ``address``
    with ``consumers`` receivers, each on its own connection of one Container (one thread);
    consumer ``i`` connects to ``urls[i % len(urls)]`` when ``urls`` are given (several front
    ends of one data dir), else to ``url``.

    Every link is named ``link_name`` and set up by ``configure`` (e.g. ``shared_durable_source``).
    Each delivery is accepted (and settled) by the consumer: at-least-once, acknowledged.

    Returns:
        ``msgs_per_s``: (count - 1) / (seconds from the first delivery to the count-th distinct
        message accepted); per-consumer accepted deliveries, duplicates, redeliveries, the time
        to attach all links and from then (credit granted) to the first delivery, client and
        broker CPU seconds over the measured span.
    """
    h = _ConsumeBacklog(
        url, address, consumers=consumers, count=count, prefetch=prefetch, link_name=link_name,
        configure=configure, timeout_s=timeout_s, cpu_probe=cpu_probe, urls=urls,
    )
    t0 = time.perf_counter()
    Container(h).run()
    wall = time.perf_counter() - t0
    end = h.t_done if h.t_done is not None else time.perf_counter()
    span = end - h.t_first if h.t_first is not None else None
    distinct = len(h.seen)
    out: dict[str, Any] = {
        "msgs_per_s": (distinct - 1) / span if span and distinct > 1 else None,
        "measured_s": span,
        "distinct_accepted": distinct,
        "missing": count - distinct,
        # Which were missing (a range and a few): tells a stall at the end from rows skipped early.
        "missing_range": _missing_range(h.seen, count),
        "deliveries": sum(h.per_consumer),
        "per_consumer_accepted": h.per_consumer,
        "per_consumer_first_accepted": h.per_consumer_first,
        "duplicates": h.duplicates,
        "redelivered": h.redelivered,
        "unstamped_messages": h.unstamped,
        "attach_s": h.t_attached - h.t_connect if h.t_attached and h.t_connect else None,
        "attach_to_first_delivery_ms": (h.t_first - h.t_attached) * 1000 if h.t_first and h.t_attached else None,
        "wall_s": wall,
        "timed_out": h.timed_out,
        "errors": h.errors[:10],
        "error_count": len(h.errors),
    }
    # marks: credit granted, first delivery, last distinct message accepted.
    if len(h.marks) == 3:
        (_, b0), (c1, b1), (c2, b2) = h.marks
        out["client_cpu_s"] = c2 - c1
        if None not in (b0, b1, b2):
            out["broker_cpu_s"] = b2 - b1
            out["broker_cpu_s_before_first_delivery"] = b1 - b0
    return out


# --------------------------------------------------------------------------- publish at a rate, several addresses


class _PublishAtRate(_Workload):
    def __init__(
        self, url: str, addresses: Sequence[str], *, rate: float, duration_s: float, size: int, window: int,
        timeout_s: float, tick_s: float, props: PropsFn | None, on_sending: Callable[[], None] | None,
        stop: threading.Event | None,
    ) -> None:
        super().__init__(url, timeout_s=timeout_s)
        self.addresses = list(addresses)
        self.rate, self.duration_s, self.size, self.window, self.tick_s = rate, duration_s, size, window, tick_s
        self.props, self.on_sending, self.stop = props, on_sending, stop
        self.senders: list[Any] = []
        self.opened = 0
        self.t0 = self.t_end = 0.0
        self.sending = False
        self.sent_at: list[float] = []  # time.monotonic() of each send, by bench_seq
        self.accepted = 0
        self.not_accepted: list[int] = []  # bench_seq of each message rejected, released or modified
        self.credit_stalls = 0

    def open_links(self, container: Container, conn: Any) -> None:
        self.senders = [container.create_sender(conn, a, name=f"bench-rate-pub-{i}") for i, a in enumerate(self.addresses)]

    def on_link_opened(self, event: Any) -> None:
        self.opened += 1
        if self.opened == len(self.senders) and not self.t0:
            self.t0 = time.monotonic()
            self.sending = True
            if self.on_sending is not None:
                self.on_sending()
            self._tick()

    def _tick(self) -> None:
        if self.done or not self.sending:
            return
        now = time.monotonic()
        if now - self.t0 >= self.duration_s or (self.stop is not None and self.stop.is_set()):
            self.sending = False
            self.t_end = now
            self._maybe_done()
            return
        due = (now - self.t0) * self.rate
        while len(self.sent_at) < due:
            seq = len(self.sent_at)
            sender = self.senders[seq % len(self.senders)]
            if sender.credit <= 0 or seq - self.accepted - len(self.not_accepted) >= self.window:
                self.credit_stalls += 1
                break
            _Encoded(seq, self.size, self.props).send(sender, str(seq))
            self.sent_at.append(time.monotonic())
        self._container.schedule(self.tick_s, _Call(self._tick))

    def _maybe_done(self) -> None:
        if not self.sending and self.t0 and self.accepted + len(self.not_accepted) == len(self.sent_at):
            self.finish()

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1
        self._maybe_done()

    def _refused(self, event: Any) -> None:
        self.not_accepted.append(int(event.delivery.tag))
        self._maybe_done()

    def on_rejected(self, event: Any) -> None:
        super().on_rejected(event)
        self._refused(event)

    def on_released(self, event: Any) -> None:  # released or modified
        super().on_released(event)
        self._refused(event)


def publish_at_rate(
    url: str, addresses: Sequence[str], *, rate: float, duration_s: float, size: int = 1024, window: int = 5000,
    timeout_s: float | None = None, tick_s: float = 0.005, props: PropsFn | None = None,
    on_sending: Callable[[], None] | None = None, stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Publish durable ``size``-byte messages at ``rate`` msg/s in total for ``duration_s`` s (or
    until ``stop`` is set), message ``bench_seq`` n to ``addresses[n % len(addresses)]`` (each
    address gets ``rate`` / len(addresses)), unsettled, at most ``window`` not yet settled; then
    wait for every outcome.

    Sending starts once every sender link has attached; ``on_sending()`` is called then (on the
    reactor's thread). A send waits for credit and the window (``credit_stalls`` counts the ticks
    that did), so a broker slower than ``rate`` shows as ``achieved_rate`` below it.
    ``timeout_s`` (default ``duration_s`` + 120) bounds the whole run.

    Returns:
        ``sent_at``: the ``time.monotonic()`` of each send, by ``bench_seq``; ``not_accepted``:
        the ``bench_seq`` of each message the broker did not accept; counts, errors, ``timed_out``.
    """
    h = _PublishAtRate(
        url, addresses, rate=rate, duration_s=duration_s, size=size, window=window,
        timeout_s=duration_s + 120.0 if timeout_s is None else timeout_s, tick_s=tick_s, props=props,
        on_sending=on_sending, stop=stop,
    )
    t0 = time.perf_counter()
    Container(h).run()
    return {
        "sent": len(h.sent_at),
        "accepted": h.accepted,
        "not_accepted": sorted(h.not_accepted),
        "achieved_rate": len(h.sent_at) / (h.t_end - h.t0) if h.t_end > h.t0 else None,
        "credit_stalls": h.credit_stalls,
        "sent_at": h.sent_at,
        "wall_s": time.perf_counter() - t0,
        "timed_out": h.timed_out,
        "errors": h.errors[:10],
        "error_count": len(h.errors),
    }
