"""Remote documents: what both flows fetch from other servers, and the one client they use.

In: a URL (an actor, a key id, an inbox) and who signs the request. Out: a parsed remote actor
or key (cached), or a one-line `FetchError`; for a delivery, the remote server's answer.

- `guard`: which URLs may be fetched at all (the address guard, pure);
- `client`: the shared HTTP client: connection reuse, caps, timeouts, signed GETs and POSTs;
- `signing_threads`: threads that compute the signatures of fetches off the event loop;
- `signing_process`: child processes that compute the worker's delivery signatures;
- `capped`: reading a body of unknown size under a cap;
- `documents`: remote actors and keys behind a cache and process memory (`RemoteDirectory`);
- `memory`: what a process remembers of them, bounded (pure), and the slim stored document;
- `keyring`: local actors' parsed signing keys, one per process, for both flows.
"""
