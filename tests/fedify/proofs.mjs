// Fedify's own FEP-8b32 code against fedqueue's proofs (tests/e2e/test_fedify_proofs.py).
//
//   node proofs.mjs PORT
//
// Serves a Fedify federation on 127.0.0.1:PORT with two actors: "bob", with an RSA-2048 and an
// Ed25519 key (Fedify publishes the Ed25519 one as a FEP-521a Multikey under assertionMethod),
// and "carol", RSA only. Every raw body POSTed to an inbox here is kept as it came. Prints
// "ready", then reads one JSON command per line on stdin and answers one JSON line on stdout:
//
//   {"do": "follow", "actor": NAME, "object": URI, "inbox": URL}
//       NAME sends Follow(object) to inbox.                          -> {"ok": true} | {"error"}
//   {"do": "received", "type": TYPE}
//       The bodies of type TYPE POSTed here so far, each checked by Fedify's verifyObject with the
//       federation's own loaders (its LD signature taken off first), as Fedify's inbox checks
//       proofs: every attribution (actor,
//       attributedTo) must be vouched for by a proof whose key (fetched, uncached) the actor
//       controls; and the same body with its object's content changed, which must not verify.
//       -> {"received": [{"id", "proofs", "verified": bool, "tamperedVerified": bool}, ...]}
//   {"do": "forward-proved", "to": URI, "inbox": URL, "content": TEXT}
//       bob's Create(Note to URI) with an eddsa-jcs-2022 proof by bob's Ed25519 key (Fedify's
//       signObject), no LD signature, POSTed to `inbox` by carol (Fedify's signRequest, her RSA
//       key): a forwarded activity whose only warrant is its proof. Nothing here serves the
//       Note, so a receiver that re-fetched it would find nothing.
//                                       -> {"status": HTTP STATUS, "id": ACTIVITY, "keyId": URI}
//
// Everything is on 127.0.0.1; allowPrivateAddress is for that and nothing else.
import readline from "node:readline";
import { serveFederation } from "./serve.mjs";
import {
  createFederation,
  generateCryptoKeyPair,
  MemoryKvStore,
  signObject,
  signRequest,
  verifyObject,
} from "@fedify/fedify";
import { Activity, Create, Follow, Note, Person } from "@fedify/vocab";
import { getDocumentLoader } from "@fedify/vocab-runtime";

const port = Number(process.argv[2]);
const origin = `http://127.0.0.1:${port}`;
const keys = {
  bob: [await generateCryptoKeyPair("RSASSA-PKCS1-v1_5"), await generateCryptoKeyPair("Ed25519")],
  carol: [await generateCryptoKeyPair("RSASSA-PKCS1-v1_5")],
};
const bodies = []; // every JSON body POSTed to an inbox here, parsed, in order
const documentLoader = getDocumentLoader({ allowPrivateAddress: true });
const loaders = { documentLoader, contextLoader: documentLoader };

const federation = createFederation({ kv: new MemoryKvStore(), allowPrivateAddress: true });
federation
  .setActorDispatcher("/users/{identifier}", async (ctx, identifier) => {
    if (!(identifier in keys)) return null;
    const pairs = await ctx.getActorKeyPairs(identifier);
    return new Person({
      id: ctx.getActorUri(identifier),
      preferredUsername: identifier,
      inbox: ctx.getInboxUri(identifier),
      publicKey: pairs[0].cryptographicKey,
      assertionMethods: pairs.map((pair) => pair.multikey),
    });
  })
  .setKeyPairsDispatcher((_ctx, identifier) => keys[identifier] ?? []);
federation.setInboxListeners("/users/{identifier}/inbox", "/inbox").on(Activity, async () => {});

const server = await serveFederation(federation, port, (req, body) => {
  if (req.method === "POST" && req.url.endsWith("/inbox")) {
    try {
      bodies.push(JSON.parse(body.toString("utf-8")));
    } catch {
      // not JSON: Fedify answers it
    }
  }
});
const ctx = federation.createContext(new URL(origin), undefined);
const unique = () => `${Date.now()}-${Math.random().toString(36).slice(2)}`;

async function verified(document) {
  const unsigned = { ...document };
  delete unsigned.signature; // as Fedify's inbox does before it checks proofs
  // The federation's own loaders, as its inbox checks proofs with.
  const options = { documentLoader: ctx.documentLoader, contextLoader: ctx.contextLoader };
  return (await verifyObject(Activity, unsigned, options)) !== null;
}

async function received(type) {
  const found = [];
  for (const document of bodies.filter((body) => body.type === type)) {
    const proofs = document.proof == null ? 0 : Array.isArray(document.proof) ? document.proof.length : 1;
    const tampered = { ...document, object: { ...document.object, content: "not what was written" } };
    found.push({
      id: document.id,
      proofs,
      verified: await verified(document),
      tamperedVerified: await verified(tampered),
    });
  }
  return { received: found };
}

async function forwardProved(command) {
  const bob = ctx.getActorUri("bob");
  const [, bobEd] = await ctx.getActorKeyPairs("bob");
  const [carolRsa] = await ctx.getActorKeyPairs("carol");
  const id = new URL(`${bob.href}/activities/${unique()}`);
  const note = new Note({
    id: new URL(`${bob.href}/notes/${unique()}`),
    attribution: bob,
    content: command.content,
    to: new URL(command.to),
  });
  const create = new Create({ id, actor: bob, object: note, to: new URL(command.to) });
  // As Fedify's own sendActivity does: the proof names the Multikey (#multikey-2), which the
  // actor document lists under assertionMethod, not the CryptographicKey id (#key-2).
  const proved = await signObject(create, bobEd.privateKey, bobEd.multikey.id, loaders);
  const body = JSON.stringify(await proved.toJsonLd({ format: "compact", contextLoader: documentLoader }));
  const request = new Request(command.inbox, {
    method: "POST",
    headers: { "content-type": "application/activity+json", accept: "application/json" },
    body,
  });
  const signed = await signRequest(request, carolRsa.privateKey, carolRsa.keyId);
  const response = await fetch(signed);
  return { status: response.status, id: id.href, keyId: bobEd.multikey.id.href, body: await response.text() };
}

async function run(command) {
  switch (command.do) {
    case "follow": {
      const me = ctx.getActorUri(command.actor);
      const follow = new Follow({ id: new URL(`${me.href}#follow-${unique()}`), actor: me, object: new URL(command.object) });
      await ctx.sendActivity({ identifier: command.actor }, { id: new URL(command.object), inboxId: new URL(command.inbox) }, follow, {
        immediate: true,
      });
      return { ok: true };
    }
    case "received":
      return await received(command.type);
    case "forward-proved":
      return await forwardProved(command);
    default:
      return { error: `unknown command ${command.do}` };
  }
}

process.stdout.write("ready\n");
for await (const line of readline.createInterface({ input: process.stdin })) {
  let answer;
  try {
    answer = await run(JSON.parse(line));
  } catch (error) {
    answer = { error: String(error?.stack ?? error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
server.close();
