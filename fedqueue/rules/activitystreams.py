"""The ActivityStreams names every side spells: the media type, the JSON-LD contexts and the
public collection (pure: constants only)."""

from __future__ import annotations

#: The media type of every ActivityPub document fedqueue sends and serves.
ACTIVITY_JSON = "application/activity+json"
#: The ActivityStreams JSON-LD context, also the profile of `application/ld+json`.
AS_CONTEXT = "https://www.w3.org/ns/activitystreams"
#: The security context, for actors' `publicKey`.
SECURITY_CONTEXT = "https://w3id.org/security/v1"
#: The public collection, in its full form.
PUBLIC = f"{AS_CONTEXT}#Public"
#: The Accept header of a fetch of an ActivityPub document.
ACCEPT_ACTIVITY = f'{ACTIVITY_JSON}, application/ld+json; profile="{AS_CONTEXT}"'
