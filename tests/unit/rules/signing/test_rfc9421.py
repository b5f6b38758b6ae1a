"""RFC 9421 HTTP Message Signatures: the RFC's own vectors, round trips and refusals.

Keys, messages and signature values are copied from RFC 9421 Appendix B.1 (keys), B.2 (the
test request and its signatures), Section 4.3 (the proxy's rsa-v1_5-sha256 signature) and
B.4 (the transformation example). The PEMs and signatures check out against each other, which
is what makes a copying mistake impossible to miss.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

from fedqueue.rules.errors import SignatureError
from fedqueue.rules.signing.requests import (
    Rfc9421Algorithm,
    Rfc9421Signature,
    parse_request_signatures,
    parse_rfc9421_signatures,
    rfc9421_signature_base,
    sign_rfc9421,
    signature_with_label,
    verify_any,
    verify_parsed,
    verify_rfc9421,
)

# RFC 9421 B.1.1 test-key-rsa (PKCS#1, as printed).
TEST_KEY_RSA_PUBLIC = """-----BEGIN RSA PUBLIC KEY-----
MIIBCgKCAQEAhAKYdtoeoy8zcAcR874L8cnZxKzAGwd7v36APp7Pv6Q2jdsPBRrw
WEBnez6d0UDKDwGbc6nxfEXAy5mbhgajzrw3MOEt8uA5txSKobBpKDeBLOsdJKFq
MGmXCQvEG7YemcxDTRPxAleIAgYYRjTSd/QBwVW9OwNFhekro3RtlinV0a75jfZg
kne/YiktSvLG34lw2zqXBDTC5NHROUqGTlML4PlNZS5Ri2U4aCNx2rUPRcKIlE0P
uKxI4T+HIaFpv8+rdV6eUgOrB2xeI1dSFFn/nnv5OoZJEIB+VmuKn3DCUcCZSFlQ
PSXSfBDiUGhwOw76WuSSsf1D4b/vLoJ10wIDAQAB
-----END RSA PUBLIC KEY-----
"""
TEST_KEY_RSA_PRIVATE = """-----BEGIN RSA PRIVATE KEY-----
MIIEqAIBAAKCAQEAhAKYdtoeoy8zcAcR874L8cnZxKzAGwd7v36APp7Pv6Q2jdsP
BRrwWEBnez6d0UDKDwGbc6nxfEXAy5mbhgajzrw3MOEt8uA5txSKobBpKDeBLOsd
JKFqMGmXCQvEG7YemcxDTRPxAleIAgYYRjTSd/QBwVW9OwNFhekro3RtlinV0a75
jfZgkne/YiktSvLG34lw2zqXBDTC5NHROUqGTlML4PlNZS5Ri2U4aCNx2rUPRcKI
lE0PuKxI4T+HIaFpv8+rdV6eUgOrB2xeI1dSFFn/nnv5OoZJEIB+VmuKn3DCUcCZ
SFlQPSXSfBDiUGhwOw76WuSSsf1D4b/vLoJ10wIDAQABAoIBAG/JZuSWdoVHbi56
vjgCgkjg3lkO1KrO3nrdm6nrgA9P9qaPjxuKoWaKO1cBQlE1pSWp/cKncYgD5WxE
CpAnRUXG2pG4zdkzCYzAh1i+c34L6oZoHsirK6oNcEnHveydfzJL5934egm6p8DW
+m1RQ70yUt4uRc0YSor+q1LGJvGQHReF0WmJBZHrhz5e63Pq7lE0gIwuBqL8SMaA
yRXtK+JGxZpImTq+NHvEWWCu09SCq0r838ceQI55SvzmTkwqtC+8AT2zFviMZkKR
Qo6SPsrqItxZWRty2izawTF0Bf5S2VAx7O+6t3wBsQ1sLptoSgX3QblELY5asI0J
YFz7LJECgYkAsqeUJmqXE3LP8tYoIjMIAKiTm9o6psPlc8CrLI9CH0UbuaA2JCOM
cCNq8SyYbTqgnWlB9ZfcAm/cFpA8tYci9m5vYK8HNxQr+8FS3Qo8N9RJ8d0U5Csw
DzMYfRghAfUGwmlWj5hp1pQzAuhwbOXFtxKHVsMPhz1IBtF9Y8jvgqgYHLbmyiu1
mwJ5AL0pYF0G7x81prlARURwHo0Yf52kEw1dxpx+JXER7hQRWQki5/NsUEtv+8RT
qn2m6qte5DXLyn83b1qRscSdnCCwKtKWUug5q2ZbwVOCJCtmRwmnP131lWRYfj67
B/xJ1ZA6X3GEf4sNReNAtaucPEelgR2nsN0gKQKBiGoqHWbK1qYvBxX2X3kbPDkv
9C+celgZd2PW7aGYLCHq7nPbmfDV0yHcWjOhXZ8jRMjmANVR/eLQ2EfsRLdW69bn
f3ZD7JS1fwGnO3exGmHO3HZG+6AvberKYVYNHahNFEw5TsAcQWDLRpkGybBcxqZo
81YCqlqidwfeO5YtlO7etx1xLyqa2NsCeG9A86UjG+aeNnXEIDk1PDK+EuiThIUa
/2IxKzJKWl1BKr2d4xAfR0ZnEYuRrbeDQYgTImOlfW6/GuYIxKYgEKCFHFqJATAG
IxHrq1PDOiSwXd2GmVVYyEmhZnbcp8CxaEMQoevxAta0ssMK3w6UsDtvUvYvF22m
qQKBiD5GwESzsFPy3Ga0MvZpn3D6EJQLgsnrtUPZx+z2Ep2x0xc5orneB5fGyF1P
WtP+fG5Q6Dpdz3LRfm+KwBCWFKQjg7uTxcjerhBWEYPmEMKYwTJF5PBG9/ddvHLQ
EQeNC8fHGg4UXU8mhHnSBt3EA10qQJfRDs15M38eG2cYwB1PZpDHScDnDA0=
-----END RSA PRIVATE KEY-----
"""
# RFC 9421 B.1.2 test-key-rsa-pss: only the public key is needed, PSS signatures are randomized.
TEST_KEY_RSA_PSS_PUBLIC = """-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAr4tmm3r20Wd/PbqvP1s2
+QEtvpuRaV8Yq40gjUR8y2Rjxa6dpG2GXHbPfvMs8ct+Lh1GH45x28Rw3Ry53mm+
oAXjyQ86OnDkZ5N8lYbggD4O3w6M6pAvLkhk95AndTrifbIFPNU8PPMO7OyrFAHq
gDsznjPFmTOtCEcN2Z1FpWgchwuYLPL+Wokqltd11nqqzi+bJ9cvSKADYdUAAN5W
Utzdpiy6LbTgSxP7ociU4Tn0g5I6aDZJ7A8Lzo0KSyZYoA485mqcO0GVAdVw9lq4
aOT9v6d+nb4bnNkQVklLQ3fVAvJm+xdDOp9LCNCN48V2pnDOkFV6+U9nV5oyc6XI
2wIDAQAB
-----END PUBLIC KEY-----
"""
# RFC 9421 B.1.4 test-key-ed25519.
TEST_KEY_ED25519_PUBLIC = """-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=
-----END PUBLIC KEY-----
"""
TEST_KEY_ED25519_PRIVATE = """-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----
"""


# RFC 9421 B.2: the test request.
TEST_URL = "https://example.com/foo?param=Value&Pet=dog"
TEST_BODY = b'{"hello": "world"}'
TEST_HEADERS = {
    "Host": "example.com",
    "Date": "Tue, 20 Apr 2021 02:07:55 GMT",
    "Content-Type": "application/json",
    "Content-Digest": (
        "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:"
    ),
    "Content-Length": "18",
}

B21_INPUT = 'sig-b21=();created=1618884473;keyid="test-key-rsa-pss";nonce="b3k2pp5k7z-50gnwp.yemd"'
B21_SIGNATURE = (
    "sig-b21=:d2pmTvmbncD3xQm8E9ZV2828BjQWGgiwAaw5bAkgibUopemLJcWDy/lkbbHAve4cRAtx31Iq786U7it++wgGxbtRxf8Udx7"
    "zFZsckzXaJMkA7ChG52eSkFxykJeNqsrWH5S+oxNFlD4dzVuwe8DhTSja8xxbR/Z2cOGdCbzR72rgFWhzx2VjBqJzsPLMIQKhO4DGez"
    "XehhWwE56YCE+O6c0mKZsfxVrogUvA4HELjVKWmAvtl6UnCh8jYzuVG5WSb/QEVPnP5TmcAnLH1g+s++v6d4s8m0gCw1fV5/SITLq9m"
    "hho8K3+7EPYTU8IU1bLhdxO5Nyt8C8ssinQ98Xw9Q==:"
)
B22_INPUT = (
    'sig-b22=("@authority" "content-digest" "@query-param";name="Pet")'
    ';created=1618884473;keyid="test-key-rsa-pss";tag="header-example"'
)
B22_SIGNATURE = (
    "sig-b22=:LjbtqUbfmvjj5C5kr1Ugj4PmLYvx9wVjZvD9GsTT4F7GrcQEdJzgI9qHxICagShLRiLMlAJjtq6N4CDfKtjvuJyE5qH7KT8"
    "UCMkSowOB4+ECxCmT8rtAmj/0PIXxi0A0nxKyB09RNrCQibbUjsLS/2YyFYXEu4TRJQzRw1rLEuEfY17SARYhpTlaqwZVtR8NV7+4U"
    "KkjqpcAoFqWFQh62s7Cl+H2fjBSpqfZUJcsIk4N6wiKYd4je2U/lankenQ99PZfB4jY3I5rSV2DSBVkSFsURIjYErOs0tFTQosMTAo"
    "xk//0RoKUqiYY8Bh0aaUEb0rQl3/XaVe4bXTugEjHSw==:"
)
B23_INPUT = (
    'sig-b23=("date" "@method" "@path" "@query" "@authority" "content-type" "content-digest" '
    '"content-length");created=1618884473;keyid="test-key-rsa-pss"'
)
B23_SIGNATURE = (
    "sig-b23=:bbN8oArOxYoyylQQUU6QYwrTuaxLwjAC9fbY2F6SVWvh0yBiMIRGOnMYwZ/5MR6fb0Kh1rIRASVxFkeGt683+qRpRRU5p2v"
    "oTp768ZrCUb38K0fUxN0O0iC59DzYx8DFll5GmydPxSmme9v6ULbMFkl+V5B1TP/yPViV7KsLNmvKiLJH1pFkh/aYA2HXXZzNBXmIk"
    "oQoLd7YfW91kE9o/CCoC1xMy7JA1ipwvKvfrs65ldmlu9bpG6A9BmzhuzF8Eim5f8ui9eH8LZH896+QIF61ka39VBrohr9iyMUJpvR"
    "X2Zbhl5ZJzSRxpJyoEZAFL2FUo5fTIztsDZKEgM4cUA==:"
)
B23_BASE = (
    '"date": Tue, 20 Apr 2021 02:07:55 GMT\n'
    '"@method": POST\n'
    '"@path": /foo\n'
    '"@query": ?param=Value&Pet=dog\n'
    '"@authority": example.com\n'
    '"content-type": application/json\n'
    f'"content-digest": {TEST_HEADERS["Content-Digest"]}\n'
    '"content-length": 18\n'
    '"@signature-params": ("date" "@method" "@path" "@query" "@authority" "content-type" "content-digest" '
    '"content-length");created=1618884473;keyid="test-key-rsa-pss"'
)
B26_INPUT = (
    'sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length")'
    ';created=1618884473;keyid="test-key-ed25519"'
)
B26_SIGNATURE = (
    "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:"
)
B26_BASE = (
    '"date": Tue, 20 Apr 2021 02:07:55 GMT\n'
    '"@method": POST\n'
    '"@path": /foo\n'
    '"@authority": example.com\n'
    '"content-type": application/json\n'
    '"content-length": 18\n'
    '"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length")'
    ';created=1618884473;keyid="test-key-ed25519"'
)

# RFC 9421 Section 4.3: a proxy re-signs the request with test-key-rsa beside the client's
# ecdsa-p256-sha256 signature sig1.
PROXY_URL = "https://origin.host.internal.example/foo?param=Value&Pet=dog"
PROXY_HEADERS = {
    "Host": "origin.host.internal.example",
    "Date": "Tue, 20 Apr 2021 02:07:56 GMT",
    "Content-Type": "application/json",
    "Content-Length": "18",
    "Forwarded": "for=192.0.2.123;host=example.com;proto=https",
    "Content-Digest": TEST_HEADERS["Content-Digest"],
}
PROXY_INPUT = (
    'sig1=("@method" "@authority" "@path" "content-digest" "content-type" "content-length")'
    ';created=1618884475;keyid="test-key-ecc-p256", '
    'proxy_sig=("@method" "@authority" "@path" "content-digest" "content-type" "content-length" "forwarded")'
    ';created=1618884480;keyid="test-key-rsa";alg="rsa-v1_5-sha256";expires=1618884540'
)
PROXY_SIG = (
    "proxy_sig=:S6ZzPXSdAMOPjN/6KXfXWNO/f7V6cHm7BXYUh3YD/fRad4BCaRZxP+JH+8XY1I6+8Cy+CM5g92iHgxtRPz+MjniOaYmdk"
    "DcnL9cCpXJleXsOckpURl49GwiyUpZ10KHgOEe11sx3G2gxI8S0jnxQB+Pu68U9vVcasqOWAEObtNKKZd8tSFu7LB5YAv0RAGhB8tmp"
    "v7sFnIm9y+7X5kXQfi8NMaZaA8i2ZHwpBdg7a6CMfwnnrtflzvZdXAsD3LH2TwevU+/PBPv0B6NMNk93wUs/vfJvye+YuI87HU38lZH"
    "owtznbLVdp770I6VHR6WfgS9ddzirrswsE1w5o0LV/g==:"
)
PROXY_SIGNATURES = (
    "sig1=:X5spyd6CFnAG5QnDyHfqoSNICd+BUP4LYMz2Q0JXlb//4Ijpzp+kve2w4NIyqeAuM7jTDX+sNalzA8ESSaHD3A==:, "
    + PROXY_SIG
)
PROXY_COMPONENTS = (
    "@method",
    "@authority",
    "@path",
    "content-digest",
    "content-type",
    "content-length",
    "forwarded",
)

# RFC 9421 B.4: a GET whose Accept header arrives on two field lines, combined here.
TRANSFORM_INPUT = (
    'transform=("@method" "@path" "@authority" "accept");created=1618884473;keyid="test-key-ed25519"'
)
TRANSFORM_SIGNATURE = (
    "transform=:ZT1kooQsEHpZ0I1IjCqtQppOmIqlJPeo7DHR3SoMn0s5JZ1eRGS0A+vyYP9t/LXlh5QMFFQ6cpLt2m0pmj3NDA==:"
)


def _public(pem: str) -> PublicKeyTypes:
    return serialization.load_pem_public_key(pem.encode())


def _private(pem: str) -> PrivateKeyTypes:
    return serialization.load_pem_private_key(pem.encode(), password=None)


def _signed(headers: dict[str, str], signature_input: str, signature: str) -> dict[str, str]:
    return headers | {"Signature-Input": signature_input, "Signature": signature}


def _only(headers: dict[str, str]) -> Rfc9421Signature:
    [parsed] = parse_rfc9421_signatures(headers)
    return parsed


# --- the RFC's vectors --------------------------------------------------------------------


def test_the_minimal_rsa_pss_example_b21_verifies_and_exposes_its_nonce() -> None:
    parsed = _only(_signed(TEST_HEADERS, B21_INPUT, B21_SIGNATURE))
    assert (parsed.label, parsed.covered, parsed.key_id) == ("sig-b21", (), "test-key-rsa-pss")
    assert (parsed.created, parsed.expires, parsed.alg, parsed.nonce) == (
        1618884473,
        None,
        None,
        "b3k2pp5k7z-50gnwp.yemd",
    )
    verify_rfc9421(
        "POST", TEST_URL, TEST_HEADERS, parsed, _public(TEST_KEY_RSA_PSS_PUBLIC), key_alg="rsa-pss-sha512"
    )


def test_the_full_coverage_rsa_pss_example_b23_has_the_published_base_and_verifies() -> None:
    headers = _signed(TEST_HEADERS, B23_INPUT, B23_SIGNATURE)
    parsed = _only(headers)
    assert rfc9421_signature_base("POST", TEST_URL, headers, parsed.signature_input) == B23_BASE.encode()
    public = _public(TEST_KEY_RSA_PSS_PUBLIC)
    verify_rfc9421("POST", TEST_URL, headers, parsed, public, key_alg="rsa-pss-sha512")
    # Its body check comes with verify_parsed; the RFC's body matches the sha-512 Content-Digest.
    with pytest.raises(SignatureError, match="does not verify"):
        # Without being told, an RSA key means rsa-v1_5-sha256 (as Mastodon), which this is not.
        verify_parsed(parsed, "POST", TEST_URL, headers, TEST_BODY, public)


def test_the_ed25519_example_b26_verifies_and_fedqueue_reproduces_it_exactly() -> None:
    headers = _signed(TEST_HEADERS, B26_INPUT, B26_SIGNATURE)
    parsed = _only(headers)
    assert rfc9421_signature_base("POST", TEST_URL, headers, parsed.signature_input) == B26_BASE.encode()
    verify_parsed(parsed, "POST", TEST_URL, headers, TEST_BODY, _public(TEST_KEY_ED25519_PUBLIC))
    signed = sign_rfc9421(
        "POST",
        TEST_URL,
        TEST_HEADERS,
        _private(TEST_KEY_ED25519_PRIVATE),
        "test-key-ed25519",
        parsed.covered,
        1618884473,
        label="sig-b26",
    )
    assert signed == {"Signature-Input": B26_INPUT, "Signature": B26_SIGNATURE}


def test_the_proxy_rsa_v1_5_example_of_section_4_3_verifies_and_fedqueue_reproduces_it() -> None:
    headers = _signed(PROXY_HEADERS, PROXY_INPUT, PROXY_SIGNATURES)
    proxy = signature_with_label(parse_request_signatures(headers), "proxy_sig")
    assert (proxy.key_id, proxy.alg, proxy.created, proxy.expires) == (
        "test-key-rsa",
        "rsa-v1_5-sha256",
        1618884480,
        1618884540,
    )
    assert proxy.covered == PROXY_COMPONENTS
    verify_parsed(proxy, "POST", PROXY_URL, headers, TEST_BODY, _public(TEST_KEY_RSA_PUBLIC))
    signed = sign_rfc9421(
        "POST",
        PROXY_URL,
        PROXY_HEADERS,
        _private(TEST_KEY_RSA_PRIVATE),
        "test-key-rsa",
        PROXY_COMPONENTS,
        1618884480,
        label="proxy_sig",
        alg="rsa-v1_5-sha256",
        expires=1618884540,
    )
    assert signed["Signature-Input"] == PROXY_INPUT.split(", ", 1)[1]
    assert signed["Signature"] == PROXY_SIG


def test_any_that_verifies_skips_a_signature_whose_key_is_not_known() -> None:
    headers = _signed(PROXY_HEADERS, PROXY_INPUT, PROXY_SIGNATURES)
    parsed = parse_request_signatures(headers)
    assert [p.key_id for p in parsed] == ["test-key-ecc-p256", "test-key-rsa"]
    chosen = verify_any(
        parsed, "POST", PROXY_URL, headers, TEST_BODY, {"test-key-rsa": _public(TEST_KEY_RSA_PUBLIC)}
    )
    assert isinstance(chosen, Rfc9421Signature)
    assert chosen.label == "proxy_sig"


def test_an_ecdsa_key_is_refused_by_name_rather_than_half_supported() -> None:
    headers = _signed(PROXY_HEADERS, PROXY_INPUT, PROXY_SIGNATURES)
    client = signature_with_label(parse_request_signatures(headers), "sig1")
    p256 = ec.generate_private_key(ec.SECP256R1()).public_key()
    with pytest.raises(SignatureError, match="need an RSA or Ed25519 key, not a key of type EC"):
        verify_parsed(client, "POST", PROXY_URL, headers, TEST_BODY, p256)


def test_the_query_param_example_b22_is_parsed_but_refused_as_unsupported() -> None:
    headers = _signed(TEST_HEADERS, B22_INPUT, B22_SIGNATURE)
    parsed = _only(headers)
    assert (parsed.tag, parsed.covered) == (
        "header-example",
        ("@authority", "content-digest", "@query-param"),
    )
    with pytest.raises(SignatureError, match="'@query-param' has parameters"):
        verify_rfc9421(
            "POST", TEST_URL, headers, parsed, _public(TEST_KEY_RSA_PSS_PUBLIC), key_alg="rsa-pss-sha512"
        )


@pytest.mark.parametrize(
    ("method", "url", "accept", "verifies"),
    [
        ("GET", "https://example.org/demo?name1=Value1&Name2=value2", "application/json, */*", True),
        # The query is not covered (@path is), so another one still verifies.
        (
            "GET",
            "https://example.org/demo?name1=Value1&Name2=value2&param=added",
            "application/json, */*",
            True,
        ),
        ("POST", "https://example.com/demo?name1=Value1&Name2=value2", "application/json, */*", False),
        ("GET", "https://example.org/demo?name1=Value1&Name2=value2", "*/*, application/json", False),
    ],
)
def test_the_transformation_examples_of_b4_hold(method: str, url: str, accept: str, verifies: bool) -> None:
    headers = _signed(
        {"Host": "example.org", "Date": "Fri, 15 Jul 2022 14:24:55 GMT", "Accept": accept},
        TRANSFORM_INPUT,
        TRANSFORM_SIGNATURE,
    )
    parsed = _only(headers)
    public = _public(TEST_KEY_ED25519_PUBLIC)
    if verifies:
        verify_rfc9421(method, url, headers, parsed, public)
    else:
        with pytest.raises(SignatureError, match="does not verify"):
            verify_rfc9421(method, url, headers, parsed, public)


# --- round trips --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def ed25519_key() -> ed25519.Ed25519PrivateKey:
    return ed25519.Ed25519PrivateKey.generate()


def _key_for(
    alg: Rfc9421Algorithm, rsa_key: rsa.RSAPrivateKey, ed25519_key: ed25519.Ed25519PrivateKey
) -> Any:
    return ed25519_key if alg == "ed25519" else rsa_key


@pytest.mark.parametrize("alg", ["rsa-v1_5-sha256", "rsa-pss-sha512", "ed25519"])
def test_a_signed_request_verifies_under_each_algorithm(
    alg: Rfc9421Algorithm, rsa_key: rsa.RSAPrivateKey, ed25519_key: ed25519.Ed25519PrivateKey
) -> None:
    private = _key_for(alg, rsa_key, ed25519_key)
    components = ("@method", "@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query")
    headers = TEST_HEADERS | sign_rfc9421(
        "POST",
        TEST_URL,
        TEST_HEADERS,
        private,
        "k",
        (*components, "content-digest", "date"),
        1700000000,
        alg=alg,
    )
    parsed = _only(headers)
    assert parsed.alg == alg
    verify_parsed(parsed, "POST", TEST_URL, headers, TEST_BODY, private.public_key())


def test_the_derived_components_have_the_rfc_values() -> None:
    components = ("@method", "@target-uri", "@authority", "@scheme", "@request-target", "@path", "@query")
    signed = sign_rfc9421(
        "GET",
        "https://Example.COM:443/a%20b?x=1",
        {},
        ed25519.Ed25519PrivateKey.generate(),
        "k",
        components,
        1,
    )
    parsed = _only(signed)
    base = rfc9421_signature_base("GET", "https://Example.COM:443/a%20b?x=1", signed, parsed.signature_input)
    assert base.decode().splitlines()[:-1] == [
        '"@method": GET',
        '"@target-uri": https://Example.COM:443/a%20b?x=1',
        '"@authority": example.com',
        '"@scheme": https',
        '"@request-target": /a%20b?x=1',
        '"@path": /a%20b',
        '"@query": ?x=1',
    ]


def test_an_absent_query_and_path_take_the_rfc_defaults() -> None:
    signed = sign_rfc9421(
        "GET",
        "http://h.example:8080",
        {},
        ed25519.Ed25519PrivateKey.generate(),
        "k",
        ("@authority", "@path", "@query"),
        1,
    )
    base = rfc9421_signature_base("GET", "http://h.example:8080", signed, _only(signed).signature_input)
    assert base.decode().splitlines()[:-1] == ['"@authority": h.example:8080', '"@path": /', '"@query": ?']


# --- refusals -----------------------------------------------------------------------------


def _ed25519_request(key: ed25519.Ed25519PrivateKey) -> dict[str, str]:
    components = ("@method", "@target-uri", "content-digest", "content-type")
    return TEST_HEADERS | sign_rfc9421("POST", TEST_URL, TEST_HEADERS, key, "k", components, 1700000000)


def test_a_tampered_body_fails_the_content_digest_check(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _ed25519_request(ed25519_key)
    with pytest.raises(SignatureError, match="Content-Digest sha-512 does not match the body"):
        verify_parsed(
            _only(headers), "POST", TEST_URL, headers, b'{"hello": "mars"}', ed25519_key.public_key()
        )


def test_a_tampered_covered_header_does_not_verify(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _ed25519_request(ed25519_key) | {"Content-Type": "text/plain"}
    with pytest.raises(SignatureError, match="signature sig1 does not verify"):
        verify_parsed(_only(headers), "POST", TEST_URL, headers, TEST_BODY, ed25519_key.public_key())


def test_another_target_does_not_verify(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _ed25519_request(ed25519_key)
    with pytest.raises(SignatureError, match="does not verify"):
        verify_parsed(_only(headers), "POST", TEST_URL + "&x=1", headers, TEST_BODY, ed25519_key.public_key())


def test_another_key_does_not_verify(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _ed25519_request(ed25519_key)
    other = ed25519.Ed25519PrivateKey.generate().public_key()
    with pytest.raises(SignatureError, match="does not verify"):
        verify_parsed(_only(headers), "POST", TEST_URL, headers, TEST_BODY, other)


def test_a_key_of_the_wrong_type_for_the_alg_is_refused(
    ed25519_key: ed25519.Ed25519PrivateKey, rsa_key: rsa.RSAPrivateKey
) -> None:
    headers = _ed25519_request(ed25519_key)
    with pytest.raises(SignatureError, match="an RSA key does not fit algorithm ed25519"):
        verify_rfc9421("POST", TEST_URL, headers, _only(headers), rsa_key.public_key(), key_alg="ed25519")


def test_an_alg_other_than_the_one_the_key_is_for_is_refused(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = TEST_HEADERS | sign_rfc9421(
        "POST", TEST_URL, TEST_HEADERS, ed25519_key, "k", ("@method",), 1, alg="ed25519"
    )
    with pytest.raises(SignatureError, match="says alg ed25519 but the key is for rsa-pss-sha512"):
        verify_rfc9421(
            "POST", TEST_URL, headers, _only(headers), ed25519_key.public_key(), key_alg="rsa-pss-sha512"
        )


@pytest.mark.parametrize("alg", ["hmac-sha256", "ecdsa-p256-sha256", "rsa-sha256"])
def test_an_unknown_alg_is_refused(alg: str, ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _signed(TEST_HEADERS, f'sig1=("@method");created=1;keyid="k";alg="{alg}"', "sig1=:AAAA:")
    with pytest.raises(SignatureError, match=f"unsupported signature algorithm '{alg}'"):
        verify_parsed(_only(headers), "POST", TEST_URL, headers, TEST_BODY, ed25519_key.public_key())


def test_a_missing_covered_component_is_named(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _ed25519_request(ed25519_key)
    del headers["Content-Type"]
    with pytest.raises(SignatureError, match="covered header 'content-type' is missing"):
        verify_parsed(_only(headers), "POST", TEST_URL, headers, TEST_BODY, ed25519_key.public_key())


def test_a_covered_content_digest_that_is_missing_is_named(ed25519_key: ed25519.Ed25519PrivateKey) -> None:
    headers = _ed25519_request(ed25519_key)
    del headers["Content-Digest"]
    with pytest.raises(SignatureError, match="'content-digest' is missing"):
        verify_parsed(_only(headers), "POST", TEST_URL, headers, TEST_BODY, ed25519_key.public_key())


@pytest.mark.parametrize(
    ("signature_input", "signature", "reason"),
    [
        ('sig1=("@method")', "sig2=:AAAA:", "Signature has label 'sig2' but Signature-Input does not"),
        (
            'sig1=("@method"), sig2=("@path")',
            "sig1=:AAAA:",
            "Signature-Input has label 'sig2' but Signature does not",
        ),
    ],
)
def test_a_label_in_one_header_but_not_the_other_is_refused(
    signature_input: str, signature: str, reason: str
) -> None:
    with pytest.raises(SignatureError, match=reason):
        parse_rfc9421_signatures(_signed(TEST_HEADERS, signature_input, signature))


@pytest.mark.parametrize(
    ("signature_input", "reason"),
    [
        ("", "no signatures"),
        ("sig1", "not a list of components"),
        ('sig1=("@method"', "not closed"),
        ('sig1=("@method""@path")', "separated by spaces"),
        ("sig1=(@method)", "unexpected '@' where a value was expected"),
        ("sig1=(method)", "names a component that is not a string"),
        ('Sig1=("@method")', "expected a key"),
        ('sig1=("@method");created="1"', "created of sig1 is not an integer"),
        ('sig1=("@method");created=1.5', "decimals are not supported"),
        ('sig1=("@method");keyid=k', "keyid of sig1 is not a string"),
        ('sig1=("@method");created=1;created=2', "'created' appears twice"),
        ('sig1=("@method"), sig1=("@path")', "'sig1' appears twice"),
        ('sig1=("@méthod")', "outside printable ASCII"),
    ],
)
def test_a_malformed_signature_input_is_refused_with_a_reason(signature_input: str, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        parse_rfc9421_signatures(_signed(TEST_HEADERS, signature_input, "sig1=:AAAA:"))


@pytest.mark.parametrize(
    ("signature", "reason"),
    [
        ('sig1="AAAA"', "Signature sig1 is not a byte sequence"),
        ("sig1=:AA AA:", "not base64"),
        ("sig1=:AAAA:,", "trailing comma"),
    ],
)
def test_a_malformed_signature_is_refused_with_a_reason(signature: str, reason: str) -> None:
    with pytest.raises(SignatureError, match=reason):
        parse_rfc9421_signatures(_signed(TEST_HEADERS, 'sig1=("@method")', signature))


@pytest.mark.parametrize(
    ("components", "reason"),
    [
        ('("@method" "@method")', "covers '@method' twice"),
        ('("@signature-params")', "covers '@signature-params'"),
        ('("@status")', "unsupported derived component '@status'"),
        ('("Content-Type")', "'Content-Type' is not lower-case"),
        ('("content-type";sf)', "has parameters"),
    ],
)
def test_a_signature_over_components_fedqueue_cannot_rebuild_is_refused(components: str, reason: str) -> None:
    headers = _signed(TEST_HEADERS, f'sig1={components};created=1;keyid="k"', "sig1=:AAAA:")
    with pytest.raises(SignatureError, match=reason):
        verify_parsed(
            _only(headers),
            "POST",
            TEST_URL,
            headers,
            TEST_BODY,
            ed25519.Ed25519PrivateKey.generate().public_key(),
        )


def test_the_signature_bytes_are_the_decoded_header_value() -> None:
    parsed = _only(_signed(TEST_HEADERS, B26_INPUT, B26_SIGNATURE))
    assert base64.b64encode(parsed.signature).decode() == B26_SIGNATURE.split(":")[1]
