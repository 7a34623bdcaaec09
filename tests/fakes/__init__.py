"""Fakes for tests: small real servers standing in for external services."""
