// Fedify peer for fedqueue's benchmarks (tests/bench): Fedify's own inbox, and Fedify's
// sendActivity fan-out, against the same loopback servers the Python benchmarks use.
//
//   node peer.mjs inbox PORT [MODE]
//       Fedify's inbox for actor "alice" on 127.0.0.1:PORT (MemoryKvStore, keys cached by
//       Fedify). A Follow of alice is answered with an Accept sent to the follower's inbox, as
//       fedqueue does. MODE: "inline" (the default: no queue, listeners and their sends run
//       before the inbox answers), "queue" (InProcessMessageQueue) or "parallel"
//       (ParallelMessageQueue of 16 over it). Prints "ready" once listening; runs until killed.
//   node peer.mjs fanout MODE N COUNT_URL ORIGIN[,ORIGIN...]
//       One Create from "alice" to N recipients spread over the origins (recipient i on origin
//       i % origins), MODE "immediate" (sendActivity's immediate option), "queue"
//       (InProcessMessageQueue), "parallel" (ParallelMessageQueue of 16 over it) or "parallel32"
//       (of 32). FEDIFY_FIRST_KNOCK=draft-cavage-http-signatures-12 makes Fedify sign its first
//       knock with draft-cavage (its default is RFC 9421: unknown servers get two). Waits (at most
//       120 s) until COUNT_URL has counted N more POSTs, then prints
//       {"seconds": ..., "cpu_s": ..., "delivered": ...} as one JSON line and exits.
//       FEDIFY_WARM_UP=1 sends (and waits for) the same once before, unmeasured: the figures
//       are then those of a process that has delivered before, as a running server's are.
//   node peer.mjs small MODE N COUNT_URL ORIGIN[,ORIGIN...]
//       As fanout, but N Likes of N distinct notes, each to one recipient (the `small` shape).
//
// Everything is on 127.0.0.1 (allowPrivateAddress is for that, and for nothing else).
import http from "node:http";
import {
  createFederation,
  generateCryptoKeyPair,
  InProcessMessageQueue,
  MemoryKvStore,
  ParallelMessageQueue,
} from "@fedify/fedify";
import { Accept, Create, Follow, Like, Note, Person } from "@fedify/vocab";

const LIMIT_MS = 120_000;
// A send to N recipients is waited for at 100 a second at least (harness.FEDIFY_FLOOR_RATE):
// a machine signing RSA-2048 in 0.8 ms sends 50,000 in about 200 s.
const limitMs = (n) => Math.max(LIMIT_MS, n * 10);

function queueFor(mode) {
  if (mode === "queue") return new InProcessMessageQueue();
  if (mode === "parallel") return new ParallelMessageQueue(new InProcessMessageQueue(), 16);
  if (mode === "parallel32") return new ParallelMessageQueue(new InProcessMessageQueue(), 32);
  return undefined;
}

function federationWith(queue) {
  const firstKnock = process.env.FEDIFY_FIRST_KNOCK || undefined;
  const federation = createFederation({
    kv: new MemoryKvStore(),
    queue,
    allowPrivateAddress: true,
    firstKnock,
  });
  return federation;
}

async function serve(federation, port) {
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) =>
        Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]],
      ),
      body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
    });
    const response = await federation.fetch(request, {
      contextData: undefined,
      onNotFound: () => new Response("not found", { status: 404 }),
      onNotAcceptable: () => new Response("not acceptable", { status: 406 }),
    });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return server;
}

async function withAlice(federation) {
  const pair = await generateCryptoKeyPair("RSASSA-PKCS1-v1_5");
  federation
    .setActorDispatcher("/users/{identifier}", async (ctx, identifier) => {
      if (identifier !== "alice") return null;
      const keys = await ctx.getActorKeyPairs(identifier);
      return new Person({
        id: ctx.getActorUri(identifier),
        preferredUsername: identifier,
        inbox: ctx.getInboxUri(identifier),
        publicKey: keys[0].cryptographicKey,
      });
    })
    .setKeyPairsDispatcher((_ctx, identifier) => (identifier === "alice" ? [pair] : []));
}

async function inbox(port, mode) {
  const federation = federationWith(queueFor(mode));
  await withAlice(federation);
  let accepts = 0;
  federation
    .setInboxListeners("/users/{identifier}/inbox", "/inbox")
    .on(Create, () => {})
    .on(Follow, async (ctx, follow) => {
      if (follow.id == null || follow.objectId == null) return;
      const follower = await follow.getActor(ctx);
      if (follower == null) return;
      const accept = new Accept({
        id: new URL(`${ctx.getActorUri("alice").href}/accepts/${++accepts}`),
        actor: follow.objectId,
        object: follow,
      });
      await ctx.sendActivity({ identifier: "alice" }, follower, accept);
    });
  await serve(federation, port);
  console.log("ready");
}

// Sends with `send(ctx, recipients)` and waits until COUNT_URL has counted N more POSTs; prints
// {"seconds", "cpu_s", "delivered"} as one JSON line and exits.
async function measured(mode, n, countUrl, origins, send) {
  const federation = federationWith(queueFor(mode));
  await withAlice(federation);
  federation.setInboxListeners("/users/{identifier}/inbox", "/inbox");
  const ctx = federation.createContext(new URL("http://127.0.0.1:1"), undefined);
  const recipients = Array.from({ length: n }, (_, i) => {
    const origin = origins[i % origins.length];
    return { id: new URL(`${origin}/users/r${i}`), inboxId: new URL(`${origin}/users/r${i}/inbox`) };
  });
  const count = async () => Number(await (await fetch(countUrl)).text());
  const round = async () => {
    const before = await count();
    const cpu = process.cpuUsage();
    const started = performance.now();
    await send(ctx, recipients, { immediate: mode === "immediate" });
    let delivered = (await count()) - before;
    while (delivered < n && performance.now() - started < limitMs(n)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      delivered = (await count()) - before;
    }
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    return { seconds, cpu_s: (used.user + used.system) / 1e6, delivered };
  };
  if (process.env.FEDIFY_WARM_UP) await round();
  console.log(JSON.stringify(await round()));
  process.exit(0);
}

// One Create to all recipients.
async function fanout(ctx, recipients, options) {
  const activity = new Create({
    id: new URL(`http://127.0.0.1:1/activities/${Date.now()}`),
    actor: ctx.getActorUri("alice"),
    object: new Note({ id: new URL("http://127.0.0.1:1/notes/1"), content: "hello" }),
  });
  await ctx.sendActivity({ identifier: "alice" }, recipients, activity, options);
}

// N Likes of N distinct notes, each to one recipient, all handed over at once.
async function small(ctx, recipients, options) {
  const stamp = Date.now();
  await Promise.all(
    recipients.map((recipient, i) =>
      ctx.sendActivity(
        { identifier: "alice" },
        recipient,
        new Like({
          id: new URL(`http://127.0.0.1:1/likes/${stamp}-${i}`),
          actor: ctx.getActorUri("alice"),
          object: new URL(`http://127.0.0.1:1/notes/${i}`),
        }),
        options,
      ),
    ),
  );
}

const [command, ...args] = process.argv.slice(2);
if (command === "inbox") {
  await inbox(Number(args[0]), args[1] ?? "inline");
} else if (command === "fanout" || command === "small") {
  const send = command === "fanout" ? fanout : small;
  await measured(args[0], Number(args[1]), args[2], args[3].split(","), send);
} else {
  console.error("usage: node peer.mjs inbox PORT [MODE] | fanout|small MODE N COUNT_URL ORIGINS");
  process.exit(2);
}
