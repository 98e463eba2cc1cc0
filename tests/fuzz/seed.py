"""The fuzz tier's seed: one per run, printed, so a failure can be replayed.

``SHAREDSUB_FUZZ_SEED=<n> pytest tests/fuzz`` replays a run; without it a fresh seed is drawn.
It seeds hypothesis (``@hypothesis.seed``) and the wire fuzzer's ``random.Random``.
"""

from __future__ import annotations

import os
import random

SEED = int(os.environ.get("SHAREDSUB_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
REPLAY = f"replay with SHAREDSUB_FUZZ_SEED={SEED}"
