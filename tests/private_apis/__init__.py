"""Pins of bridgecli.private_apis: each test fails if the library changes under a reach-in."""
