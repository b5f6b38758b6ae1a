"""Tests of fedqueue.outbound."""
