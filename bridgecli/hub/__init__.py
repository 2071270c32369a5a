"""The hub: a host that runs the shared broker for other hosts (its PKI and broker admin)."""
