"""Tests of bridgecli.cli, one module per command."""
