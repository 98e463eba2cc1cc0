"""Who owns what on shared storage: leases and their decision tables (pure)."""
