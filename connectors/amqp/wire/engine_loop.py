"""The front end's event loop: sockets, proton engines, timers and cross-thread work on one thread.

    loop = EngineLoop(handler)
    loop.add(channel)                       # a socket: connectors.amqp.amqp_socket
    loop.schedule(0.5, task)                # task.on_timer_task(event), or task() for a callable
    loop.injector.call(fn)                  # fn() on the loop's thread; from any thread
    loop.run()                              # until loop.stop()

It takes the place of proton's ``Container`` (python-qpid-proton's pure-Python reactor) and does
what the front end needs of it, with less Python work per message:

* **Bulk I/O.** A readable socket is read up to :data:`READ_SIZE` bytes at once and all of it
  pushed into the transport (the Container reads at most the transport's free input buffer,
  8 KiB, about seven 1 KiB transfers per pass). Output is written once per pass, after the
  events that made it.
* **No event per I/O step.** The Container turns every readiness, interest change and timer into a
  proton event dispatched through its handler chain (selectable readable/updated/..., transport,
  reactor quiesced); here the loop calls the socket's methods directly.
* **Events the handler does not take are not built.** Proton events go to the handler through
  :class:`~connectors.amqp.wire.proton_events.EventPump`, which reads each event's type first and
  wraps only those the handler has a method for (see that module).

Everything runs on the thread that calls :meth:`run`; other threads reach it only through
:attr:`injector`, whose calls are plain typed callables (a bound method and its arguments), not
events named by strings. The handler sees the proton events of the Container's: the same ``on_*``
methods with the same event attributes (``connection``, ``session``, ``link``, ``delivery``,
``transport``), TRANSPORT_CLOSED once a connection's socket is gone.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from proton import Connection, Handler, Transport

from connectors.amqp.wire import reactor_thread
from connectors.amqp.wire.proton_events import EventCollector, EventPump

log = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
"""Bytes read from a socket at once."""

IDLE_WAIT = 3600.0
"""Seconds the loop sleeps when no timer or deadline is due (anything arriving wakes it)."""


def now() -> float:
    """The loop's clock (seconds, monotonic): timers, deadlines and ``Transport.tick``."""
    return time.monotonic()


class Channel(Protocol):
    """A socket the loop watches. The loop calls these on its thread only."""

    sock: socket.socket

    def on_readable(self) -> None:
        """The socket has input (or EOF, or an error)."""

    def on_writable(self) -> None:
        """The socket takes output again."""

    def on_expired(self, at: float) -> None:
        """The channel's :meth:`deadline` passed."""

    def interest(self) -> int:
        """``selectors.EVENT_READ`` / ``EVENT_WRITE`` bits the channel waits for now (0: none)."""
        ...

    def deadline(self) -> float | None:
        """When :meth:`on_expired` is due (the loop's clock), or None."""
        ...

    def flush(self) -> None:
        """Move what the channel's transport has to say to the socket (after a pass's events)."""

    def transport_closed(self, transport: Transport) -> None:
        """Both ends of the channel's transport are closed: close the socket."""

    def abort(self, reason: str) -> None:
        """Close the channel at once (its handling failed)."""


Call = Callable[[], None]
"""Work another thread hands the loop: run once on the loop's thread (what it raises is logged)."""


class Injector:
    """Any thread -> the loop: calls (:data:`Call`), run on the loop's thread in the order they
    were queued.

    A call appends to a deque and, unless a wake-up is already on its way, writes one byte to
    a socket pair the loop watches: many calls between two passes cost one wake-up. No lock:
    a signal handler may call it (``sharedsub serve`` stops on SIGTERM that way), and it runs on
    the loop's own thread, between two bytecodes of whatever the loop was doing, so a lock the
    loop held there would never be released. The deque's append and popleft are atomic; the
    order of the steps in :meth:`call` and :meth:`take` is what makes a lost wake-up
    impossible (see there).
    """

    def __init__(self) -> None:
        self._queue: collections.deque[Call] = collections.deque()
        self._signalled = False
        self._closed = False
        self.reader, self._writer = socket.socketpair()
        self.reader.setblocking(False)
        self._writer.setblocking(False)

    def call(self, fn: Call) -> None:
        """Queue ``fn`` for the loop (any thread, a signal handler too; dropped once
        :meth:`close` was called)."""
        if self._closed:
            return
        self._queue.append(fn)  # first: a take() that clears the flag after this append also takes fn
        if self._signalled:
            return  # a wake-up is on its way, and the take() it leads to comes after this append
        self._signalled = True
        try:
            self._writer.send(b"\0")
        except (BlockingIOError, InterruptedError):
            pass  # the pair's buffer is full of wake-ups: the loop is woken anyway
        except OSError:
            pass  # disposed of while we got here: the loop has ended

    def take(self) -> list[Call]:
        """Everything queued (the loop's thread), oldest first; clears the wake-up.

        The wake-up bytes are read first, then the flag is cleared, then the queue is emptied.
        A call that finds the flag up was queued after some call raised it since the last
        clearing; that call's byte was written after the reading that preceded the clearing, so
        it is still to be read: the loop wakes and a later take() finds what was queued. A call
        that finds the flag down writes its own byte. (Clearing before reading lost wake-ups: a
        call raising the flag between the clearing and the reading had its byte read at once,
        its function taken in the same pass, and the flag left up with no byte on its way, so
        the next call queued, found it up, wrote nothing, and waited for some other wake-up:
        tests/unit/test_engine_loop.py.)
        """
        try:
            while self.reader.recv(4096):
                pass
        except (BlockingIOError, InterruptedError, OSError):
            pass
        self._signalled = False
        queue = self._queue
        items = []
        while queue:
            items.append(queue.popleft())
        return items

    def pending(self) -> bool:
        """Whether calls are queued."""
        return bool(self._queue)

    def close(self) -> None:
        """Take no more calls (those queued still run)."""
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (calls are dropped from then on)."""
        return self._closed

    def dispose(self) -> None:
        """Close the socket pair (the loop has ended)."""
        self.reader.close()
        self._writer.close()


class TimerTask:
    """A scheduled call; :meth:`cancel` keeps it from running."""

    __slots__ = ("target", "cancelled")

    # Proton's timer convention: an object with ``on_timer_task(event)``, or a plain callable; _run_timers
    # tells them apart by getattr, and the loop's path takes no check that would narrow a union of the two.
    def __init__(self, target: Any) -> None:  # Any: see above
        self.target = target
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run it."""
        self.cancelled = True


class _TimerEvent:
    """What a timer target's ``on_timer_task`` gets (the Container passes a proton event)."""

    __slots__ = ("container",)

    def __init__(self, loop: EngineLoop) -> None:
        self.container = loop


class EngineLoop:
    """One thread's loop over channels (sockets), proton's events, timers and injected calls."""

    def __init__(self, handler: Handler, injector: Injector | None = None) -> None:
        """Dispatch proton's events to ``handler``; other threads reach the loop through
        ``injector`` (a new one when None)."""
        self.handler = handler
        self.collector = EventCollector()
        self.injector = injector if injector is not None else Injector()
        self._pump = EventPump(self.collector, handler, self)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.injector.reader, selectors.EVENT_READ, None)
        self._interest: dict[Channel, int] = {}
        self._timers: list[tuple[float, int, TimerTask]] = []
        self._deadlines: list[tuple[float, int, Channel]] = []
        self._seq = itertools.count()
        self._dirty: dict[Channel, None] = {}
        self._transports: dict[Transport, Channel] = {}
        self._stopped = False
        self.now = now()

    # ------------------------------------------------------------------ channels

    def add(self, channel: Channel) -> None:
        """Watch ``channel``'s socket."""
        self._interest[channel] = 0
        self.update(channel)

    def update(self, channel: Channel) -> None:
        """Re-read what ``channel`` waits for (interest, deadline)."""
        current = self._interest.get(channel)
        if current is None:
            return
        want = channel.interest()
        if want != current:
            if current == 0:
                self._selector.register(channel.sock, want, channel)
            elif want == 0:
                self._selector.unregister(channel.sock)
            else:
                self._selector.modify(channel.sock, want, channel)
            self._interest[channel] = want
        at = channel.deadline()
        if at is not None:
            heapq.heappush(self._deadlines, (at, next(self._seq), channel))

    def remove(self, channel: Channel) -> None:
        """Stop watching ``channel`` (its socket is the channel's to close)."""
        if self._interest.pop(channel, 0):
            self._selector.unregister(channel.sock)
        self._dirty.pop(channel, None)

    def watched(self) -> int:
        """How many channels (listeners, sockets) the loop watches."""
        return len(self._interest)

    def connection(self) -> Connection:
        """A new connection whose events go to the loop's handler."""
        conn = Connection()
        # EventCollector stands in for proton's Collector (proton_events: collect reads its C object).
        conn.collect(self.collector)  # type: ignore[arg-type]
        return conn

    def bind(self, channel: Channel, connection: Connection, transport: Transport) -> None:
        """``transport`` (bound here to ``connection``) carries ``channel``'s bytes: its events
        (output to write, closed) are the channel's."""
        self._transports[transport] = channel
        transport.bind(connection)

    def unbind(self, transport: Transport) -> None:
        """Forget ``transport`` (its socket is gone) and unbind it from its connection."""
        self._transports.pop(transport, None)
        transport.unbind()

    def transport_changed(self, transport: Transport) -> None:
        """Proton's TRANSPORT event: the channel has output (flushed at the end of the pass)."""
        channel = self._transports.get(transport)
        if channel is not None:
            self._dirty[channel] = None

    def transport_closed(self, transport: Transport) -> None:
        """Proton's TRANSPORT_CLOSED (after the handler saw it): the channel closes."""
        channel = self._transports.get(transport)
        if channel is not None:
            channel.transport_closed(transport)

    def mark_dirty(self, channel: Channel) -> None:
        """Flush ``channel`` at the end of this pass."""
        self._dirty[channel] = None

    # ------------------------------------------------------------------ timers

    def schedule(self, delay: float, target: Any) -> TimerTask:  # Any: as TimerTask's target
        """Run ``target`` in ``delay`` seconds on the loop: ``target.on_timer_task(event)``, or
        ``target()`` when it is a plain callable."""
        task = TimerTask(target)
        heapq.heappush(self._timers, (now() + max(0.0, delay), next(self._seq), task))
        return task

    def _run_timers(self, at: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= at:
            _, _, task = heapq.heappop(timers)
            if task.cancelled:
                continue
            target = task.target
            try:
                on_timer = getattr(target, "on_timer_task", None)
                if on_timer is not None:
                    on_timer(_TimerEvent(self))
                else:
                    target()
            except Exception:  # one timer's failure must not end the loop
                log.exception("timer task %r failed", target)

    def _run_deadlines(self, at: float) -> None:
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= at:
            _, _, channel = heapq.heappop(deadlines)
            if channel not in self._interest:
                continue
            due = channel.deadline()
            if due is not None and due <= at:
                channel.on_expired(at)
                self.update(channel)

    def _timeout(self) -> float:
        soonest = IDLE_WAIT
        if self._timers:
            soonest = min(soonest, self._timers[0][0] - now())
        if self._deadlines:
            soonest = min(soonest, self._deadlines[0][0] - now())
        return max(0.0, soonest)

    # ------------------------------------------------------------------ running

    def stop(self) -> None:
        """End :meth:`run` after the current pass (the loop's thread; others use the injector)."""
        self._stopped = True

    def run(self) -> None:
        """Serve until :meth:`stop`; the calling thread is the reactor's from now on
        (connectors/amqp/wire/reactor_thread.py)."""
        reactor_thread.bind()
        select = self._selector.select
        injector = self.injector
        while not self._stopped:
            self._pass()
            if self._stopped:
                break
            ready = select(0.0 if injector.pending() else self._timeout())
            self.now = at = now()
            for key, mask in ready:
                channel = key.data
                if channel is None:
                    continue  # the injector's wake-up: taken in the pass
                try:
                    if mask & selectors.EVENT_READ:
                        channel.on_readable()
                    if mask & selectors.EVENT_WRITE:
                        channel.on_writable()
                except Exception:  # a channel's fault ends that channel, not the loop
                    log.exception("socket handling failed")
                    self._abort(channel)
                self.update(channel)
            self._run_timers(at)
            self._run_deadlines(at)
        self._selector.close()
        self.injector.dispose()

    def _pass(self) -> None:
        """Run the injected calls queued now and dispatch every proton event, then flush the
        channels those gave output to.

        Injected calls are taken once per pass: what other threads queue meanwhile waits for the
        next pass, after the sockets and timers had their turn (the select does not wait then),
        so a steady stream of them cannot starve the clients.
        """
        for fn in self.injector.take():
            try:
                fn()
            except Exception:
                log.exception("injected call %r failed", fn)
        self._pump.drain()
        dirty = self._dirty
        while dirty:
            channel = next(iter(dirty))
            del dirty[channel]
            try:
                channel.flush()
            except Exception:
                log.exception("socket output failed")
                self._abort(channel)
            self.update(channel)

    def _abort(self, channel: Channel) -> None:
        try:
            channel.abort("internal error")
        except Exception:
            log.exception("closing a failed socket failed")
        self.remove(channel)
