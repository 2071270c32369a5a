"""Shared pytest fixtures for real components (RabbitMQ, …), loaded from the root conftest."""
