"""Tests of fedqueue.web."""
