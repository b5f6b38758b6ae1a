"""A histogram's Prometheus buckets count every observation at or below their bound."""

from fedqueue.metrics import Histogram


def test_each_bucket_counts_the_observations_at_or_below_its_bound() -> None:
    histogram = Histogram((1.0, 2.0, 5.0))
    for value in (0.5, 1.0, 1.5, 2.0, 4.0, 9.0, 0.0):
        histogram.observe(value)
    assert histogram.cumulative() == [3, 5, 6]
    assert histogram.count == 7
    assert histogram.total == 18.0
