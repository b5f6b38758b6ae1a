"""Outbound: from an activity a local app hands in to a signed POST in every recipient's inbox.

In: an outbox row (POSTed to `/actors/{name}/outbox`, or INSERTed by an app). Out: one
delivery row per (activity, inbox), each ending `delivered`, `dead` or `coalesced`.

The flow, in order: `intake` (what is acceptable) → `fanout` (one delivery per inbox, with
`addressing`) → `coalescer` (the `coalesce_rules` after fan-out and before sending) →
`worker` (claims under a lease) → `dispatch` (admission by `circuit`, bodies, chains) →
`attempts` (`scheme_discovery` with `scheme_rules`) → `send` (sign on `remote.signing_process`,
POST) → `record` (`outcomes`, `backoff`, host health). `service.fanout_status` reads where one
activity's fan-out stands.
"""
