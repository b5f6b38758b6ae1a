"""Signing: the HTTP signature rules, pure (no network, no database, `now` passed in).

In: a request (method, URL, headers, body) and a key. Out: the headers that sign it, or the
parsed signatures it carries and whether one verifies.

- `requests`: the one surface for both schemes (`sign_request`, `parse_request_signatures`,
  `verify_parsed`, `verify_any`);
- `cavage`: draft-cavage-http-signatures-12, as Mastodon sends it, and the `Digest` header;
- `rfc9421`: RFC 9421 HTTP Message Signatures;
- `structured_fields`: the RFC 8941 fields RFC 9421 is written in;
- `digests`: RFC 9530 `Content-Digest`;
- `keys`: local actors' key pairs and bearer tokens;
- `multikey`: FEP-521a `publicKeyMultibase` of Ed25519 keys;
- `fep521a`: the Multikey entries an actor document publishes under `assertionMethod`;
- `data_integrity`: FEP-8b32 proofs (`eddsa-jcs-2022`) and the RFC 8785 JSON canonicalization under them.
"""
