// The remote side of tests/bench/bench_deployed.py: N hosts as N loopback ports of one Node
// `http` server, as cheap per request as a receiver can be, so that the sender's cost is what
// a fan-out measures.
//
//   node receiver.mjs HOSTS KEYS_JSON
//
// Listens on HOSTS free ports of 127.0.0.1 (keep-alive); prints them as one JSON line
// ({"ports": [...]}) once all listen; runs until killed. Every POST is counted and answered
// 202 at once. GET /count: the POSTs counted so far. GET /mark?at=K: from now on, note when
// the first POST is counted and when the count reaches K; GET /marked: those two instants as
// JSON ({"first": ns, "reached": ns}, null until they happen) in process.hrtime's nanoseconds,
// CLOCK_MONOTONIC, which is time.perf_counter's clock on Linux: the benchmark times a fan-out
// to the POST that ended it, not to its next look at /count. GET /users/NAME: an actor
// document (for the signed Follows' key fetches), with public key i % keys for actor sI, from
// KEYS_JSON (a file holding a JSON list of PEM strings). The actors have no shared inbox: a
// fan-out to N followers is N POSTs, as Fedify's sendActivity to the same N recipients is.
import { readFileSync } from "node:fs";
import http from "node:http";

const [hosts, keysFile] = process.argv.slice(2);
const pems = JSON.parse(readFileSync(keysFile, "utf8"));
let count = 0;
let mark = null;

function actor(origin, name) {
  const uri = `${origin}/users/${name}`;
  const index = Number(name.replace(/^s/, "")) || 0;
  return {
    "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
    id: uri,
    type: "Person",
    preferredUsername: name,
    inbox: `${uri}/inbox`,
    publicKey: { id: `${uri}#main-key`, owner: uri, publicKeyPem: pems[index % pems.length] },
  };
}

function handle(req, res) {
  if (req.method === "POST") {
    req.resume();
    req.on("end", () => {
      count += 1;
      if (mark !== null && mark.reached === null) {
        const now = process.hrtime.bigint();
        mark.first ??= now;
        if (count >= mark.at) mark.reached = now;
      }
      res.writeHead(202, { "content-length": "0" });
      res.end();
    });
    return;
  }
  if (req.url === "/count") {
    res.end(String(count));
    return;
  }
  if (req.url?.startsWith("/mark?")) {
    mark = { at: Number(new URL(req.url, "http://receiver").searchParams.get("at")), first: null, reached: null };
    res.end("marked");
    return;
  }
  if (req.url === "/marked") {
    const ns = (instant) => (instant === null ? null : String(instant));
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ first: ns(mark?.first ?? null), reached: ns(mark?.reached ?? null) }));
    return;
  }
  const match = /^\/users\/([^/?#]+)$/.exec(req.url ?? "");
  if (match) {
    const body = JSON.stringify(actor(`http://${req.headers.host}`, match[1]));
    res.writeHead(200, { "content-type": "application/activity+json" });
    res.end(body);
    return;
  }
  res.writeHead(404);
  res.end();
}

const ports = [];
for (let i = 0; i < Number(hosts); i++) {
  const server = http.createServer(handle);
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  ports.push(server.address().port);
}
console.log(JSON.stringify({ ports }));
