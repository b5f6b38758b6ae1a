"""What a person reads for a failed exchange (a pure rule)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.rules.outcomes import readable_error

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=19)


@pytest.mark.parametrize(
    ("raw", "readable"),
    [
        (
            "ClientConnectorError: Cannot connect to host 127.0.0.1:9 ssl:default "
            "[Connect call failed ('127.0.0.1', 9)]",
            "connection refused",
        ),
        ("ConnectError: [Errno 111] Connection refused", "connection refused"),
        ("timed out", "timed out after 30 s"),
        (
            "ConnectionTimeoutError: Connection timeout to host https://a.example/inbox",
            "timed out after 30 s",
        ),
        (
            "ClientConnectorCertificateError: Cannot connect to host a.example:443 ssl:True "
            "[SSLCertVerificationError: (1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed')]",
            "TLS certificate not trusted",
        ),
        (
            "ClientConnectorSSLError: Cannot connect to host a.example:443 ssl:default "
            "[[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)]",
            "TLS handshake failed",
        ),
        (
            "ClientConnectorDNSError: Cannot connect to host nx.example:443 ssl:default "
            "[Name or service not known]",
            "host name not found",
        ),
        ("ServerDisconnectedError: Server disconnected", "server closed the connection"),
        ("ClientOSError: [Errno 104] Connection reset by peer", "connection reset by the server"),
        ("GET https://a.example/users/bob answered 404", "GET https://a.example/users/bob answered 404"),
    ],
)
def test_raw_transport_text_reads_as_what_happened(raw: str, readable: str) -> None:
    assert readable_error(raw, 30.0) == readable


def test_a_timeout_names_the_time_waited() -> None:
    assert readable_error("timed out", 7.5) == "timed out after 7.5 s"
