"""Unit tests: the pure rules, next to the package they test; no database, no sockets."""
