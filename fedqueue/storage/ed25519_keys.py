"""Local actors' and the instance actor's Ed25519 key pairs (FEP-521a), beside their RSA ones.

Stored like the RSA key (PKCS#8 PEM, encrypted under the private-key passphrase when one is
set). An actor made before migration 0024 has none: `fill_ed25519_keys` makes the missing
ones, at `fedqueue migrate` and at each start of `serve` and `worker`. Every write is a
conditional UPDATE (`... WHERE ed25519_public_key_pem IS NULL`), so two processes starting at
once cannot give one actor two keys: the second write changes no row, and both then read the
first one's key.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Table, select, update

from fedqueue.rules.signing import keys
from fedqueue.storage.database import Database
from fedqueue.storage.schema import ACTORS, INSTANCE_KEY


def new_key_columns(passphrase: bytes | None) -> dict[str, str]:
    """A fresh Ed25519 key pair as the values of its two columns (actors' and the instance key's)."""
    pair = keys.generate_ed25519_key_pair(passphrase)
    return {"ed25519_private_key_pem": pair.private_pem, "ed25519_public_key_pem": pair.public_pem}


async def actor_ed25519_key(db: Database, name: str, passphrase: bytes | None) -> Ed25519PrivateKey | None:
    """The local actor's Ed25519 private key, loaded for signing; None while it has none."""
    async with db.reading() as conn:
        query = select(ACTORS.c.ed25519_private_key_pem).where(ACTORS.c.name == name)
        pem = (await conn.execute(query)).scalar()
    return None if pem is None else keys.load_ed25519_private_key(pem, passphrase)


async def instance_ed25519_key(db: Database, passphrase: bytes | None) -> Ed25519PrivateKey | None:
    """The instance actor's Ed25519 private key, loaded for signing; None while it has none."""
    async with db.reading() as conn:
        pem = (await conn.execute(select(INSTANCE_KEY.c.ed25519_private_key_pem))).scalar()
    return None if pem is None else keys.load_ed25519_private_key(pem, passphrase)


async def instance_ed25519_public_pem(db: Database) -> str | None:
    """The instance actor's Ed25519 public key (PEM), None while it has none."""
    async with db.reading() as conn:
        return (await conn.execute(select(INSTANCE_KEY.c.ed25519_public_key_pem))).scalar()


async def fill_ed25519_keys(db: Database, passphrase: bytes | None) -> int:
    """Give every local actor (deleted ones too: their Delete is still signed) and the instance
    actor that lacks one an Ed25519 key pair; how many actors this call gave one.

    The caller checks first that `passphrase` is the one the stored keys are under
    (`ActorStore.check_passphrase`): a key sealed under another would be lost.
    """
    made = 0
    for table, key in ((ACTORS, ACTORS.c.name), (INSTANCE_KEY, INSTANCE_KEY.c.id)):
        async with db.reading() as conn:
            missing = select(key).where(table.c.ed25519_public_key_pem.is_(None))
            row_keys = list((await conn.execute(missing)).scalars())
        for row_key in row_keys:
            made += await _fill_one(db, table, row_key, passphrase)
    return made


async def _fill_one(db: Database, table: Table, row_key: object, passphrase: bytes | None) -> int:
    """1 if this call stored a new pair for the row, 0 if another process did first."""
    key = table.c.name if table is ACTORS else table.c.id
    async with db.transaction() as conn:
        changed = await conn.execute(
            update(table)
            .where(key == row_key, table.c.ed25519_public_key_pem.is_(None))
            .values(new_key_columns(passphrase))
        )
    return int(changed.rowcount or 0)
