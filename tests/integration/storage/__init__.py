"""Tests of fedqueue.storage."""
