"""The pure floor: rules and domain types that storage and both flows share.

Everything here is pure (no I/O, no database, no network; `now` is passed in): the states,
the error tree, addressing, backoff, the circuit, outcomes, coalescing, the signature schemes
(`signing/`), the address guard's decisions and the shapes of the documents fedqueue writes.
A module is pure exactly when it lives here: the import-linter contract "rules" checks this
package as a whole, and storage, the flows and the edges all import it while it imports none of
them (docs/decisions/0001-layers.md).
"""
