"""Tests of fedqueue.signing."""
