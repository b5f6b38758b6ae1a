// Fedify as a remote server for fedqueue's interop tests (tests/e2e/test_fedify_interop.py).
//
//   node interop.mjs PORT
//
// Serves a Fedify federation on 127.0.0.1:PORT with seven actors, each with an RSA-2048 key
// (so Fedify adds a Linked Data signature to what it sends): "carol" writes replies, "dave"
// forwards what carol sends him, "leaving" and "gone" delete themselves, "fan" follows
// fedqueue's actors, "old" moves to "new"; each accepts every Follow. Prints "ready", then
// reads one JSON command per line on stdin and answers one JSON line on stdout:
//
//   {"do": "follow", "actor": NAME, "object": URI, "inbox": URL}
//       NAME sends Follow(object) to inbox.                          -> {"ok": true} | {"error"}
//   {"do": "gone", "actor": NAME}
//       NAME's actor document (and key) answers 410 Gone from now on. -> {"ok": true}
//   {"do": "delete-self", "actor": NAME, "to": URI, "inbox": URL}
//       NAME sends Delete(NAME), actor == object, as Mastodon does for a deleted account.
//   {"do": "reply-via", "author": NAME, "forwarder": NAME2, "inReplyTo": URI, "to": URI, "inbox": URL}
//       NAME sends Create(Note inReplyTo) to NAME2's inbox on this same server; NAME2's inbox
//       listener forwards it unchanged (ctx.forwardActivity) to `inbox`, signed by NAME2.
//                                               -> {"ok": true, "id": ACTIVITY} | {"error"}
//   {"do": "accepts"}  -> {"accepts": [ACTOR, ...]}: who sent this server an Accept so far.
//   {"do": "ed25519Refused"} -> {"refused": N}: inbox POSTs signed with Ed25519 answered 401 so
//       far (with FEDIFY_REFUSE_ED25519=1 in its environment: an RSA-only server; else 0).
//   {"do": "received"} -> {"received": [{"id", "actor", "object", "recipient"}, ...]}: the Creates
//       this server's actors received (other than those they forward), ids as URIs.
//   {"do": "reply", "actor": NAME, "inReplyTo": URI, "to": URI, "inbox": URL, "content": TEXT}
//       NAME sends Create(Note inReplyTo, content) to `inbox`.  -> {"ok": true, "id": ACTIVITY}
//   {"do": "inbox", "actor": NAME}
//       -> {"inbox": [{"type", "id", "actor", "object", "target"}, ...]}: the Delete, Move, Follow
//       and Undo activities NAME's inbox took, in order. Fedify calls a listener only for an
//       activity whose signature it verified, so each one listed was verified.
//   {"do": "followers", "actor": NAME} -> {"followers": [ACTOR, ...]}: whose Follow NAME accepted
//       (every Follow is accepted at once, by a signed Accept).
//   {"do": "setAlias", "actor": NAME, "alias": URI}
//       NAME's actor document lists URI in alsoKnownAs from now on.   -> {"ok": true}
//   {"do": "move", "actor": NAME, "target": URI}
//       NAME's document names URI as movedTo, and NAME sends Move(NAME -> URI) to each of its
//       followers (fedqueue's are verified by their inbox).            -> {"ok": true, "id", "sent"}
//   {"do": "fetchKey", "keyId": URI}
//       Fedify's own key fetch, uncached (as by a server that never saw the key):
//       -> {"ok": true, "owner": URI} if it yields a key, else {"error": HTTP STATUS | REASON}.
//   {"do": "fetchMultikey", "keyId": URI}
//       Fedify's key fetch of a FEP-521a Multikey (fetchKeyDetailed with Multikey), uncached:
//       -> {"ok": true, "controller": URI, "algorithm": NAME} if it yields a key, else {"error"}.
//   {"do": "assertionMethods", "uri": URI}
//       Fedify looks up the actor at URI (unsigned, uncached) and reads its assertionMethod:
//       -> {"keys": [{"id", "controller", "algorithm"}, ...]} (algorithm: the CryptoKey's).
//   {"do": "lookup", "uri": URI, "signer": NAME | null}
//       Fedify dereferences URI (lookupObject), with a GET signed as NAME (its authenticated
//       document loader) or unsigned: -> {"status": 200, "id", "type", "content"} if Fedify reads
//       an object there, else {"status": HTTP STATUS, "type": the answer's type, if JSON}.
//   {"do": "verifyLd", "document": OBJECT}
//       Fedify's verifyJsonLd on OBJECT: its Linked Data signature checked with the key its
//       `creator` names (fetched, uncached), whose owner must be the activity's actor.
//                                                                   -> {"verified": true | false}
//
// Everything is on 127.0.0.1; allowPrivateAddress is for that and nothing else. Sends use
// `immediate: true`, so a refusal (any non-2xx) comes back as {"error"} at once.
import readline from "node:readline";
import { serveFederation } from "./serve.mjs";
import {
  createFederation,
  fetchKeyDetailed,
  generateCryptoKeyPair,
  MemoryKvStore,
  verifyJsonLd,
} from "@fedify/fedify";
import {
  Accept,
  Create,
  CryptographicKey,
  Delete,
  Follow,
  Move,
  Multikey,
  Note,
  Person,
  PUBLIC_COLLECTION,
  Tombstone,
  Undo,
} from "@fedify/vocab";
import { FetchError, getDocumentLoader } from "@fedify/vocab-runtime";

const ACTORS = ["carol", "dave", "gone", "leaving", "fan", "old", "new"];
const port = Number(process.argv[2]);
const origin = `http://127.0.0.1:${port}`;
const keys = Object.fromEntries(
  await Promise.all(ACTORS.map(async (name) => [name, await generateCryptoKeyPair("RSASSA-PKCS1-v1_5")])),
);
const goneActors = new Set();
const accepts = [];
const received = [];
const forwards = new Map(); // forwarder -> {inbox, to, done(result)}
const inboxes = new Map(); // actor -> [{type, id, actor, object, target}]
const followers = new Map(); // actor -> Map(follower URI -> inbox URL)
const aliases = new Map(); // actor -> [URI]
const movedTo = new Map(); // actor -> URI

function took(ctx, activity) {
  if (ctx.recipient == null) return;
  const list = inboxes.get(ctx.recipient) ?? [];
  list.push({
    type: activity.constructor.typeId.href.split("#").pop(),
    id: activity.id?.href,
    actor: activity.actorId?.href,
    object: activity.objectId?.href,
    target: activity.targetId?.href,
  });
  inboxes.set(ctx.recipient, list);
}

const federation = createFederation({ kv: new MemoryKvStore(), allowPrivateAddress: true });
federation
  .setActorDispatcher("/users/{identifier}", async (ctx, identifier) => {
    if (!ACTORS.includes(identifier)) return null;
    if (goneActors.has(identifier)) {
      return new Tombstone({ id: ctx.getActorUri(identifier) });
    }
    const pairs = await ctx.getActorKeyPairs(identifier);
    return new Person({
      id: ctx.getActorUri(identifier),
      preferredUsername: identifier,
      inbox: ctx.getInboxUri(identifier),
      publicKey: pairs[0].cryptographicKey,
      aliases: (aliases.get(identifier) ?? []).map((uri) => new URL(uri)),
      successor: movedTo.has(identifier) ? new URL(movedTo.get(identifier)) : null,
    });
  })
  .setKeyPairsDispatcher((_ctx, identifier) => (identifier in keys ? [keys[identifier]] : []));
federation
  .setInboxListeners("/users/{identifier}/inbox", "/inbox")
  .on(Accept, async (_ctx, accept) => {
    accepts.push(accept.actorId?.href);
  })
  .on(Follow, async (ctx, follow) => {
    took(ctx, follow);
    const follower = await follow.getActor(ctx);
    if (ctx.recipient == null || follower?.id == null || follower.inboxId == null) return;
    const mine = followers.get(ctx.recipient) ?? new Map();
    mine.set(follower.id.href, follower.inboxId.href);
    followers.set(ctx.recipient, mine);
    const me = ctx.getActorUri(ctx.recipient);
    await ctx.sendActivity(
      { identifier: ctx.recipient },
      follower,
      new Accept({ id: new URL(`${me.href}#accept-${unique()}`), actor: me, object: follow }),
      { immediate: true },
    );
  })
  .on(Undo, async (ctx, undo) => took(ctx, undo))
  .on(Delete, async (ctx, deletion) => took(ctx, deletion))
  .on(Move, async (ctx, move) => took(ctx, move))
  .on(Create, async (ctx, create) => {
    const waiting = ctx.recipient == null ? undefined : forwards.get(ctx.recipient);
    if (waiting === undefined) {
      received.push({
        id: create.id?.href,
        actor: create.actorId?.href,
        object: create.objectId?.href,
        recipient: ctx.recipient,
      });
      return;
    }
    forwards.delete(ctx.recipient);
    try {
      await ctx.forwardActivity(
        { identifier: ctx.recipient },
        { id: new URL(waiting.to), inboxId: new URL(waiting.inbox) },
        { skipIfUnsigned: true, immediate: true },
      );
      waiting.done({ ok: true, id: create.id?.href });
    } catch (error) {
      waiting.done({ error: String(error) });
    }
  });

// FEDIFY_REFUSE_ED25519=1: a server that takes RSA signatures only. An inbox POST signed with an
// Ed25519 key (RFC 9421 alg "ed25519", or a keyid naming one) is answered 401 before Fedify
// reads it, and counted; everything else is Fedify's.
const refuseEd25519 = process.env.FEDIFY_REFUSE_ED25519 === "1";
let ed25519Refused = 0;
const server = await serveFederation(federation, port, (req) => {
  const input = req.headers["signature-input"] ?? "";
  if (refuseEd25519 && req.method === "POST" && /alg="ed25519"|#ed25519-key"/.test(input)) {
    ed25519Refused += 1;
    return new Response("Ed25519 signatures are not accepted here", { status: 401 });
  }
  return undefined;
});
const ctx = federation.createContext(new URL(origin), undefined);

async function send(actor, inbox, recipientId, activity) {
  await ctx.sendActivity({ identifier: actor }, { id: new URL(recipientId), inboxId: new URL(inbox) }, activity, {
    immediate: true,
  });
  return { ok: true, id: activity.id?.href };
}

const unique = () => `${Date.now()}-${Math.random().toString(36).slice(2)}`;

async function run(command) {
  switch (command.do) {
    case "follow":
      return send(
        command.actor,
        command.inbox,
        command.object,
        new Follow({
          id: new URL(`${origin}/activities/follow-${unique()}`),
          actor: ctx.getActorUri(command.actor),
          object: new URL(command.object),
        }),
      );
    case "gone":
      goneActors.add(command.actor);
      return { ok: true };
    case "delete-self": {
      const actor = ctx.getActorUri(command.actor);
      return send(
        command.actor,
        command.inbox,
        command.to,
        new Delete({
          id: new URL(`${actor.href}#delete-${unique()}`),
          actor,
          object: actor,
          tos: [PUBLIC_COLLECTION],
        }),
      );
    }
    case "reply-via": {
      const author = ctx.getActorUri(command.author);
      const forwarder = ctx.getActorUri(command.forwarder);
      const note = new Note({
        id: new URL(`${origin}/notes/${unique()}`),
        attribution: author,
        content: "a reply, relayed by a third party",
        replyTarget: new URL(command.inReplyTo),
        tos: [new URL(command.to)],
        ccs: [forwarder],
      });
      const create = new Create({
        id: new URL(`${note.id.href}/activity`),
        actor: author,
        object: note,
        tos: [new URL(command.to)],
        ccs: [forwarder],
      });
      const forwarded = new Promise((resolve) => forwards.set(command.forwarder, { ...command, done: resolve }));
      await send(command.author, ctx.getInboxUri(command.forwarder).href, forwarder.href, create);
      return await forwarded;
    }
    case "reply": {
      const note = new Note({
        id: new URL(`${origin}/notes/${unique()}`),
        attribution: ctx.getActorUri(command.actor),
        content: command.content,
        replyTarget: new URL(command.inReplyTo),
        tos: [new URL(command.to)],
      });
      return send(
        command.actor,
        command.inbox,
        command.to,
        new Create({
          id: new URL(`${note.id.href}/activity`),
          actor: ctx.getActorUri(command.actor),
          object: note,
          tos: [new URL(command.to)],
        }),
      );
    }
    case "accepts":
      return { accepts };
    case "ed25519Refused":
      return { refused: ed25519Refused };
    case "inbox":
      return { inbox: inboxes.get(command.actor) ?? [] };
    case "followers":
      return { followers: [...(followers.get(command.actor)?.keys() ?? [])] };
    case "setAlias":
      aliases.set(command.actor, [...(aliases.get(command.actor) ?? []), command.alias]);
      return { ok: true };
    case "move": {
      movedTo.set(command.actor, command.target);
      const actor = ctx.getActorUri(command.actor);
      const move = new Move({
        id: new URL(`${actor.href}#move-${unique()}`),
        actor,
        object: actor,
        target: new URL(command.target),
        tos: [PUBLIC_COLLECTION],
      });
      const sent = [];
      for (const [follower, inbox] of followers.get(command.actor) ?? []) {
        await send(command.actor, inbox, follower, move);
        sent.push(follower);
      }
      return { ok: true, id: move.id.href, sent };
    }
    case "fetchKey": {
      const { key, fetchError } = await fetchKeyDetailed(new URL(command.keyId), CryptographicKey, {
        documentLoader: getDocumentLoader({ allowPrivateAddress: true }), // no cache: a fresh fetch
        contextLoader: ctx.contextLoader,
      });
      if (key != null) return { ok: true, owner: key.ownerId?.href };
      return { error: fetchError == null ? "no key" : String(fetchError.status ?? fetchError.error) };
    }
    case "fetchMultikey": {
      const { key, fetchError } = await fetchKeyDetailed(new URL(command.keyId), Multikey, {
        documentLoader: getDocumentLoader({ allowPrivateAddress: true }), // no cache: a fresh fetch
        contextLoader: ctx.contextLoader,
      });
      if (key != null) return { ok: true, controller: key.controllerId?.href, algorithm: key.publicKey?.algorithm?.name };
      return { error: fetchError == null ? "no key" : String(fetchError.status ?? fetchError.error) };
    }
    case "assertionMethods": {
      const documentLoader = getDocumentLoader({ allowPrivateAddress: true });
      const actor = await ctx.lookupObject(command.uri, { documentLoader });
      if (actor == null || typeof actor.getAssertionMethods !== "function") return { error: "no actor" };
      const found = [];
      for await (const key of actor.getAssertionMethods({ documentLoader })) {
        found.push({ id: key.id?.href, controller: key.controllerId?.href, algorithm: key.publicKey?.algorithm?.name });
      }
      return { keys: found };
    }
    case "lookup":
      return lookup(command.uri, command.signer);
    case "verifyLd": {
      const verified = await verifyJsonLd(command.document, {
        documentLoader: getDocumentLoader({ allowPrivateAddress: true }), // no cache: a fresh fetch
        contextLoader: ctx.contextLoader,
      });
      return { verified };
    }
    case "received":
      return { received };
    default:
      return { error: `unknown command ${JSON.stringify(command.do)}` };
  }
}

async function lookup(uri, signer) {
  const documentLoader =
    signer == null
      ? getDocumentLoader({ allowPrivateAddress: true })
      : await ctx.getDocumentLoader({ identifier: signer });
  try {
    await documentLoader(uri); // a refusal throws, with the answer's status
  } catch (error) {
    if (!(error instanceof FetchError) || error.response == null) return { error: String(error) };
    const body = await error.response.json().catch(() => null);
    return { status: error.response.status, type: body?.type };
  }
  const object = await ctx.lookupObject(uri, { documentLoader });
  if (object == null) return { error: "Fedify read no object" };
  return {
    status: 200,
    id: object.id?.href,
    type: object.constructor.typeId.href.split("#").pop(),
    content: object.content?.toString(),
  };
}

console.log("ready");
for await (const line of readline.createInterface({ input: process.stdin })) {
  let answer;
  try {
    answer = await run(JSON.parse(line));
  } catch (error) {
    answer = { error: String(error) };
  }
  console.log(JSON.stringify(answer));
}
server.close();
