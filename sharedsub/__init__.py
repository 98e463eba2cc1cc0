"""sharedsub: JMS 2.0 shared, durable and non-durable topic subscriptions over AMQP 1.0,
stored in Delta Lake and routed by PySpark Structured Streaming.

Public API (importing this package pulls in neither deltalake, proton nor pyspark)::

    from sharedsub import load_settings, Settings, SubscriptionKey, SubscriptionRecord
"""

from __future__ import annotations

from sharedsub.core.config import Settings, load_settings
from sharedsub.core.errors import SharedSubError
from sharedsub.core.model import SubscriptionKey, SubscriptionRecord

__all__ = ["Settings", "SharedSubError", "SubscriptionKey", "SubscriptionRecord", "load_settings"]
