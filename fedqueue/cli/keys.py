"""`fedqueue keys encrypt`: the private keys stored in plain text, encrypted under the passphrase."""

from __future__ import annotations

import argparse
import asyncio

from fedqueue.cli.core import existing_database_settings
from fedqueue.cli.help import Subparsers, command
from fedqueue.rules.signing.keys import KeysAtRest
from fedqueue.rules.wording import plural
from fedqueue.service import actors as local_actors
from fedqueue.service.database import open_store


def register(commands: Subparsers) -> None:
    keys = command(
        commands,
        "keys",
        "private keys at rest: encrypt those stored in plain text",
        "With private_key_passphrase_file set (FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE), keys made "
        "from then on are stored encrypted under its passphrase; `encrypt` encrypts the ones "
        "stored before, in one transaction, and says how many it did. Run it with serve and the "
        "workers stopped or already given the passphrase; running it again does nothing.",
        ["fedqueue keys encrypt  # with FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE=/etc/fedqueue/key-passphrase"],
    )
    actions = keys.add_subparsers(dest="keys_action", required=True, metavar="ACTION")
    encrypt = actions.add_parser(
        "encrypt",
        help="encrypt the plain private keys under the passphrase",
        description="encrypt the plain private keys under the passphrase",
    )
    encrypt.set_defaults(run=run_keys_encrypt)


def run_keys_encrypt(args: argparse.Namespace) -> int:
    settings = existing_database_settings()

    async def encrypt() -> tuple[int, KeysAtRest]:
        store = open_store(settings.database_url, settings.private_key_passphrase())
        try:
            return await local_actors.encrypt_private_keys(store)
        finally:
            await store.close()

    done, at_rest = asyncio.run(encrypt())
    encrypted, stored = at_rest.encrypted, at_rest.encrypted + at_rest.plain
    print(
        f"encrypted {plural(done, 'private key')} now; {encrypted} of {stored} stored are encrypted at rest"
    )
    return 0
