"""Tests of fedqueue.remote."""
