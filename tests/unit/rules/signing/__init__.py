"""Tests of fedqueue.rules.signing."""
