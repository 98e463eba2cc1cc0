"""Subscriptions: what an attach or a detach decides (``attach``, the decision table), the
terminus a link carries (``terminus``) and the JMS link names (``linknames``)."""
