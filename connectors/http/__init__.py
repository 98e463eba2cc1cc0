"""HTTP endpoint of the service: metrics, health and admin calls (stdlib http.server)."""
