"""Fixtures of the security suite: a real hub with a joined host (tests/multihost/hub_lab.py)."""

from __future__ import annotations

from tests.multihost.hub_lab import hub_lab  # noqa: F401  (a fixture of this suite)
