"""Integration tests: a real database on both engines and loopback servers, in-process."""
