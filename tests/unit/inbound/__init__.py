"""Tests of fedqueue.inbound."""
