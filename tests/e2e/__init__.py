"""End-to-end tests: real processes, the command line and a real browser."""
