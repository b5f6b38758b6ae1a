"""Inbound: what remote servers POST to the inboxes, from the request to the stored activity.

In: a signed POST (the web edge, `web/inbox`, reads it). Out: a verified, deduplicated
activity with one inbox entry per local recipient, and its effects (followers), or a refusal
with a one-line reason.

- `receive`: the flow, from a signed request to the stored activity and its effects;
- `receive_rules`: media types, JSON limits, local recipients (pure);
- `signature_schemes`: draft-cavage and RFC 9421 as the policy sees them (pure);
- `verify`: the signature policy: coverage, time window, keys, the owner rule;
- `follows`: what a Follow, Undo(Follow) or Delete changes, tombstones included (pure);
- `gone`: which unverifiable self-Deletes of deleted actors are still accepted (pure);
- `throttle`: a token bucket per remote host (pure, `now` passed in);
- `health`: what an inbound request tells the delivery side about its sender's host;
- `pruning`: dropping inbox entries every consumer has acknowledged, and old tombstones.
"""
