// One home for serving a Fedify federation over Node's http on loopback, for interop.mjs and
// proofs.mjs: each request becomes a fetch Request for `federation.fetch`, as a Node adapter does.

import http from "node:http";

function toRequest(req, body) {
  return new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method,
    headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => [k, x]) : [[k, v]])),
    body: req.method === "GET" || req.method === "HEAD" ? undefined : body,
  });
}

// Serves `federation` on 127.0.0.1:`port`; `before(req, body)`, when given, sees each raw request
// first and may answer it itself by returning a Response (else Fedify answers). Resolves once
// listening.
export async function serveFederation(federation, port, before = () => undefined) {
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const response =
      before(req, body) ??
      (await federation.fetch(toRequest(req, body), {
        contextData: undefined,
        onNotFound: () => new Response("not found", { status: 404 }),
        onNotAcceptable: () => new Response("not acceptable", { status: 406 }),
      }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return server;
}
