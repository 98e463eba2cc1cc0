"""Consumers held attached by a child process: for more consumers than one Python process can
hold (proton's reactor waits with ``select()``, which takes at most 1,024 descriptors: a few
hundred connections).

    parent: HeldSubscribers(url, [(topic, subscription, container), ...])  # at most PER_CHILD
    child:  .venv/bin/python bench/held_subscribers.py URL   (reads the list as one JSON line)

Each one is a JMS shared durable subscription with one consumer (tests/amqp_peer.py
``Subscriber``, credit 100, accepting what comes), as bench/served_bucket.py attaches in its own
process. The child prints ``attached N`` once every one is attached (``failed ...`` and exits
when one is not, in 60 s), then holds them until its stdin closes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PER_CHILD = 250
"""Consumers one child holds (each is a connection and a wake-up pipe)."""


class HeldSubscribers:
    """A child process holding ``specs`` attached until :meth:`stop`."""

    def __init__(self, url: str, specs: list[tuple[str, str, str]], env: dict[str, str] | None = None) -> None:
        if len(specs) > PER_CHILD:
            raise ValueError(f"{len(specs)} consumers: at most {PER_CHILD} a child")
        self.proc = subprocess.Popen(
            [sys.executable, __file__, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(specs) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().strip()
        if line != f"attached {len(specs)}":
            self.stop()
            raise RuntimeError(f"held subscribers: {line or 'the child ended'}")

    def stop(self) -> None:
        """Detach them all and end the child."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _hold(url: str) -> int:
    from tests.amqp_peer import Subscriber, jms_shared_durable

    specs = json.loads(sys.stdin.readline())
    subs = []
    try:
        for topic, name, container in specs:
            sub = Subscriber(url, topic, container_id=container, **jms_shared_durable(name))
            sub.start()
            subs.append(sub)
            if not sub.attached.wait(60):
                print(f"failed {name} on {topic}: {sub.error}", flush=True)
                return 1
        print(f"attached {len(subs)}", flush=True)
        sys.stdin.read()  # until the parent closes it
        return 0
    finally:
        for sub in subs:
            sub.stop()


if __name__ == "__main__":
    sys.exit(_hold(sys.argv[1]))
