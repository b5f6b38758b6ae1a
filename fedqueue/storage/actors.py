"""Local actors: creation, lookup, token checks. Private keys leave only as signing keys.

With a passphrase (`private_key_passphrase_file`), keys are written encrypted and read back
through it (`signing.keys`); `encrypt_keys` encrypts those stored before it was set.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import ActorGone, Duplicate, InvalidInput, NotFound, SettingsError
from fedqueue.rules.profile_fields import Profile
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.keys import KeysAtRest
from fedqueue.rules.states import FollowerState
from fedqueue.storage import ed25519_keys
from fedqueue.storage.audit import record_audit
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.schema import ACTORS, FOLLOWERS, INSTANCE_KEY

#: The columns of a local actor's profile, read with it.
PROFILE_COLUMNS = (
    ACTORS.c.display_name,
    ACTORS.c.summary,
    ACTORS.c.icon_url,
    ACTORS.c.image_url,
    ACTORS.c.profile_url,
    ACTORS.c.actor_type,
    ACTORS.c.profile_fields,
    ACTORS.c.discoverable,
    ACTORS.c.indexable,
)


@dataclass(frozen=True)
class LocalActor:
    """What anyone may know about a local actor (no private key, no token)."""

    name: str
    public_key_pem: str
    auto_accept_follows: bool
    created_at: datetime
    #: Set once deleted: the actor is a Tombstone (410) from then on.
    deleted_at: datetime | None = None
    also_known_as: tuple[str, ...] = ()
    moved_to: str | None = None
    profile: Profile = field(default_factory=Profile)
    #: Its Ed25519 public key (PEM), published as a FEP-521a Multikey; None until made.
    ed25519_public_key_pem: str | None = None


def profile_of(row: Any) -> Profile:
    """The profile in a row read with `PROFILE_COLUMNS`."""
    return Profile(
        name=row.display_name,
        summary=row.summary,
        icon=row.icon_url,
        image=row.image_url,
        url=row.profile_url,
        type=row.actor_type,
        fields=tuple((name, value) for name, value in json.loads(row.profile_fields or "[]")),
        discoverable=row.discoverable,
        indexable=row.indexable,
    )


def profile_values(profile: Profile) -> dict[str, Any]:
    """The column values that store `profile`."""
    return {
        "display_name": profile.name,
        "summary": profile.summary,
        "icon_url": profile.icon,
        "image_url": profile.image,
        "profile_url": profile.url,
        "actor_type": profile.type,
        "profile_fields": json.dumps(profile.fields, ensure_ascii=False) if profile.fields else None,
        "discoverable": profile.discoverable,
        "indexable": profile.indexable,
    }


@dataclass(frozen=True)
class CreatedActor:
    actor: LocalActor
    token: str


@dataclass(frozen=True)
class ActorListing:
    """One row of the actor list: a local actor, its accepted followers, whether it is locked or deleted."""

    name: str
    created_at: datetime
    followers: int
    locked: bool
    deleted_at: datetime | None


#: Every stored private key's column: (its table, the table's key, the column), RSA and Ed25519.
_PRIVATE_KEY_COLUMNS = tuple(
    (table, key, table.c[column])
    for table, key in ((ACTORS, ACTORS.c.name), (INSTANCE_KEY, INSTANCE_KEY.c.id))
    for column in ("private_key_pem", "ed25519_private_key_pem")
)


def _loads(public_pem: str) -> bool:
    try:
        keys.load_public_key(public_pem)
    except InvalidInput:
        return False
    return True


class ActorStore:
    def __init__(self, database: Database, key_passphrase: bytes | None = None) -> None:
        self._db = database
        self._passphrase = key_passphrase
        self._passphrase_checked = False
        # Built once, the same SQL for any number of names (read for every claimed group of rows).
        self._deleted = select(ACTORS.c.name).where(
            database.dialect.one_of(ACTORS.c.name, "names"), ACTORS.c.deleted_at.is_not(None)
        )

    async def create(self, name: str, who: str | None = None) -> CreatedActor:
        """A new actor with a fresh RSA-2048 key pair; the token is returned once, stored hashed.

        With `who` (an admin, through the admin API) the creation is audited in its transaction.
        """
        check_actor_name(name)
        await self.check_passphrase()  # a key sealed under a wrong passphrase would be lost
        pair = keys.generate_key_pair(self._passphrase)
        token = keys.new_token()
        try:
            async with self._db.transaction() as conn:
                await conn.execute(
                    insert(ACTORS).values(
                        name=name,
                        private_key_pem=pair.private_pem,
                        public_key_pem=pair.public_pem,
                        **ed25519_keys.new_key_columns(self._passphrase),
                        token_hash=keys.hash_token(token),
                    )
                )
                if who is not None:
                    await record_audit(conn, who, "actor_create", f"actor:{name}", {}, utcnow())
        except IntegrityError:
            existing = await self.get(name)
            if existing.deleted_at is not None:
                raise Duplicate(
                    f"actor {name!r} was deleted at {existing.deleted_at:%Y-%m-%d %H:%M} UTC; "
                    "its name stays taken while its tombstone lasts (actor_tombstone_days)"
                ) from None
            raise Duplicate(f"actor {name!r} exists already") from None
        return CreatedActor(actor=await self.get(name), token=token)

    async def get(self, name: str) -> LocalActor:
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(
                        ACTORS.c.name,
                        ACTORS.c.public_key_pem,
                        ACTORS.c.auto_accept_follows,
                        ACTORS.c.created_at,
                        ACTORS.c.deleted_at,
                        ACTORS.c.also_known_as,
                        ACTORS.c.moved_to,
                        ACTORS.c.ed25519_public_key_pem,
                        *PROFILE_COLUMNS,
                    ).where(ACTORS.c.name == name)
                )
            ).first()
        if row is None:
            raise NotFound(f"no local actor named {name!r}")
        return LocalActor(
            name=row.name,
            public_key_pem=row.public_key_pem,
            auto_accept_follows=row.auto_accept_follows,
            created_at=row.created_at,
            deleted_at=row.deleted_at,
            also_known_as=tuple(json.loads(row.also_known_as or "[]")),
            moved_to=row.moved_to,
            profile=profile_of(row),
            ed25519_public_key_pem=row.ed25519_public_key_pem,
        )

    async def live(self, name: str) -> LocalActor:
        """The actor, unless deleted (ActorGone, 410) or unknown (NotFound)."""
        actor = await self.get(name)
        if actor.deleted_at is not None:
            raise ActorGone(f"actor {name!r} was deleted")
        return actor

    async def names(self, limit: int | None = None) -> list[str]:
        """The names of the local actors not deleted, in order; the first `limit` if given."""
        async with self._db.reading() as conn:
            live = select(ACTORS.c.name).where(ACTORS.c.deleted_at.is_(None)).order_by(ACTORS.c.name)
            return list((await conn.execute(live.limit(limit))).scalars())

    async def page(self, after: str | None, limit: int) -> list[ActorListing]:
        """Up to `limit` local actors (deleted ones too) by name, those after the name `after`;
        each with its count of accepted followers (one statement)."""
        followers = (
            select(func.count())
            .where(FOLLOWERS.c.actor == ACTORS.c.name, FOLLOWERS.c.state == FollowerState.ACCEPTED)
            .scalar_subquery()
        )
        query = select(
            ACTORS.c.name, ACTORS.c.created_at, ACTORS.c.auto_accept_follows, ACTORS.c.deleted_at, followers
        )
        if after is not None:
            query = query.where(ACTORS.c.name > after)
        async with self._db.reading() as conn:
            rows = (await conn.execute(query.order_by(ACTORS.c.name).limit(limit))).all()
        return [
            ActorListing(row.name, row.created_at, int(row[4]), not row.auto_accept_follows, row.deleted_at)
            for row in rows
        ]

    async def rotate_token(self, name: str, who: str) -> str:
        """A new outbox token for the live actor `name`, returned once; the old one is refused
        from this transaction's commit on. Audited as `who`."""
        token = keys.new_token()
        async with self._db.transaction() as conn:
            changed = await conn.execute(
                update(ACTORS)
                .where(ACTORS.c.name == name, ACTORS.c.deleted_at.is_(None))
                .values(token_hash=keys.hash_token(token))
            )
            if changed.rowcount:
                await record_audit(conn, who, "actor_token_rotate", f"actor:{name}", {}, utcnow())
        if not changed.rowcount:
            await self.live(name)  # NotFound or ActorGone, with its message
            raise NotFound(f"no local actor named {name!r}")
        return token

    async def deleted_among(self, names: Collection[str]) -> set[str]:
        """Those of `names` that are deleted actors (one statement, however many names)."""
        if not names:
            return set()
        async with self._db.reading() as conn:
            return set((await conn.execute(self._deleted, {"names": sorted(names)})).scalars())

    async def without_usable_keys(self) -> list[str]:
        """Names of the actors whose key pair is missing or whose public key does not load."""
        columns = select(ACTORS.c.name, ACTORS.c.private_key_pem, ACTORS.c.public_key_pem)
        async with self._db.reading() as conn:
            rows = (await conn.execute(columns)).all()
        return [row.name for row in rows if not row.private_key_pem or not _loads(row.public_key_pem)]

    async def token_is_valid(self, name: str, token: str) -> bool:
        """Constant-time check of an outbox bearer token; False for unknown actors too."""
        async with self._db.reading() as conn:
            stored = (await conn.execute(select(ACTORS.c.token_hash).where(ACTORS.c.name == name))).scalar()
        # Compare against a dummy for unknown actors so timing does not reveal which names exist.
        return keys.token_matches(token, stored or "0" * 64) and stored is not None

    async def owner_of_token(self, token: str) -> str | None:
        """The name of the actor whose outbox bearer token this is, or None.

        Looked up by the token's SHA-256: equality on a hash of a random token leaks nothing
        useful by timing.
        """
        async with self._db.reading() as conn:
            return (
                await conn.execute(select(ACTORS.c.name).where(ACTORS.c.token_hash == keys.hash_token(token)))
            ).scalar()

    async def signing_key(self, name: str) -> PrivateKeyTypes:
        """The actor's private key, loaded for signing only."""
        async with self._db.reading() as conn:
            pem = (await conn.execute(select(ACTORS.c.private_key_pem).where(ACTORS.c.name == name))).scalar()
        if pem is None:
            raise NotFound(f"no local actor named {name!r}")
        return keys.load_private_key(pem, self._passphrase)

    async def ed25519_signing_key(self, name: str) -> Ed25519PrivateKey | None:
        """The actor's Ed25519 private key, loaded for signing only; None while it has none."""
        return await ed25519_keys.actor_ed25519_key(self._db, name, self._passphrase)

    async def instance_ed25519_signing_key(self) -> Ed25519PrivateKey | None:
        """The instance actor's Ed25519 private key (None while it has none)."""
        await self._instance_key_pems()
        return await ed25519_keys.instance_ed25519_key(self._db, self._passphrase)

    async def instance_ed25519_public_key(self) -> str | None:
        """The instance actor's Ed25519 public key (PEM), None while it has none."""
        await self._instance_key_pems()
        return await ed25519_keys.instance_ed25519_public_pem(self._db)

    async def new_key_pair(self, ed25519: bool) -> keys.KeyPair:
        """A fresh key pair for a rotation, sealed like the stored ones (SettingsError if it cannot)."""
        await self.check_passphrase()
        return (keys.generate_ed25519_key_pair if ed25519 else keys.generate_key_pair)(self._passphrase)

    async def fill_ed25519_keys(self) -> int:
        """Make the Ed25519 key pairs that actors made before migration 0024 lack; how many.
        SettingsError unless the passphrase is the stored keys' (new ones are sealed under it)."""
        await self.check_passphrase()
        return await ed25519_keys.fill_ed25519_keys(self._db, self._passphrase)

    async def instance_public_key(self) -> str:
        """The instance actor's public key (PEM); the key pair is made on first need."""
        return (await self._instance_key_pems())[1]

    async def instance_signing_key(self) -> PrivateKeyTypes:
        """The instance actor's private key, loaded for signing only; made on first need."""
        return keys.load_private_key((await self._instance_key_pems())[0], self._passphrase)

    async def _instance_key_pems(self) -> tuple[str, str]:
        """(private, public) PEM of the one instance key; concurrent first calls agree on one pair."""
        found = await self._read_instance_key()
        if found is not None:
            return found
        await self.check_passphrase()
        pair = keys.generate_key_pair(self._passphrase)
        async with self._db.transaction() as conn:
            await conn.execute(
                self._db.dialect.insert_ignoring_conflicts(INSTANCE_KEY, ["id"]).values(
                    id=1,
                    private_key_pem=pair.private_pem,
                    public_key_pem=pair.public_pem,
                    **ed25519_keys.new_key_columns(self._passphrase),
                )
            )
        found = await self._read_instance_key()
        assert found is not None  # inserted just now, or by whoever won the race
        return found

    async def _read_instance_key(self) -> tuple[str, str] | None:
        async with self._db.reading() as conn:
            row = (
                await conn.execute(select(INSTANCE_KEY.c.private_key_pem, INSTANCE_KEY.c.public_key_pem))
            ).first()
        return None if row is None else (row.private_key_pem, row.public_key_pem)

    async def keys_at_rest(self) -> KeysAtRest:
        """How many stored private keys (actors' not deleted, and the instance's) are encrypted
        and how many are in plain text."""
        counts = []
        async with self._db.reading() as conn:
            for column in (ACTORS.c.private_key_pem, INSTANCE_KEY.c.private_key_pem):  # with Ed25519s
                encrypted = func.count().filter(column.startswith(keys.ENCRYPTED_PEM))
                query = select(encrypted, func.count()).where(column != "")
                counts.append((await conn.execute(query)).one())
        return KeysAtRest(
            encrypted=sum(int(row[0]) for row in counts), plain=sum(int(row[1] - row[0]) for row in counts)
        )

    async def check_passphrase(self) -> None:
        """SettingsError (one line, naming the setting) unless this store can read its keys: an
        encrypted key needs the passphrase, and the one given must decrypt it.

        One encrypted key is tried (all are encrypted under one passphrase); once it loaded,
        the answer is kept for the process.
        """
        if self._passphrase_checked:
            return
        async with self._db.reading() as conn:
            for _, _, column in _PRIVATE_KEY_COLUMNS:
                pem = (
                    await conn.execute(select(column).where(column.startswith(keys.ENCRYPTED_PEM)).limit(1))
                ).scalar()
                if pem is not None:
                    keys.load_private_key(pem, self._passphrase)
                    break
        self._passphrase_checked = True

    async def encrypt_keys(self) -> int:
        """Encrypt every plain stored private key under the passphrase, in one transaction; for how
        many actors (an actor's RSA and Ed25519 keys count as one, as `keys_at_rest` counts them).

        SettingsError without a passphrase, or if it does not decrypt the keys encrypted already.
        """
        if (passphrase := self._passphrase) is None:
            raise SettingsError(
                f"no passphrase to encrypt the private keys with: set {keys.KEY_FILE_SETTING}"
            )
        await self.check_passphrase()
        encrypted: set[tuple[str, object]] = set()
        async with self._db.transaction() as conn:
            for table, key, column in _PRIVATE_KEY_COLUMNS:
                plain = select(key, column).where(column != "", ~column.startswith(keys.ENCRYPTED_PEM))
                for row_key, pem in (await conn.execute(plain)).all():
                    sealed = keys.encrypt_private_key(pem, passphrase)
                    await conn.execute(update(table).where(key == row_key).values({column.name: sealed}))
                    encrypted.add((table.name, row_key))
        return len(encrypted)
