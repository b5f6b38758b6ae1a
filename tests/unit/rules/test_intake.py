"""What the outbox intake keeps of an app's activity (pure `rules/intake.normalize`)."""

from __future__ import annotations

from fedqueue.rules.intake import normalize
from fedqueue.rules.urls import Urls

URLS = Urls("https://fq.example")


def test_an_apps_own_signature_and_proof_are_dropped_so_fedqueue_signs_and_proves_what_goes_out() -> None:
    sent = {
        "type": "Create",
        "object": {"type": "Note", "content": "hi"},
        "signature": {"type": "RsaSignature2017", "signatureValue": "x"},
        "proof": {"type": "DataIntegrityProof", "cryptosuite": "eddsa-jcs-2022", "proofValue": "z1"},
    }
    activity, _facts = normalize(sent, "alice", URLS, lambda: "t")
    assert "signature" not in activity and "proof" not in activity
    assert activity["object"] == {"type": "Note", "content": "hi"}
    assert "proof" in sent  # the app's dict is not changed under it
