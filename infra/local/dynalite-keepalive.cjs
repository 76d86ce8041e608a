// Starts dynalite (same arguments as its CLI) with four additions.
//
// 1. dynalite does not handle a request whose client hangs up mid-body: node
//    raises "Error: aborted" as an uncaught exception and the emulator dies,
//    taking every table with it. A cancelled AWS SDK call does exactly that
//    (a Lambda timing out, a test cancelling a context). DynamoDB itself just
//    drops such a request: so does this wrapper; anything else still ends the
//    process.
// 2. TransactWriteItems, which dynalite lacks: the service writes a payment
//    request and its transaction together. As DynamoDB documents it
//    (docs/testing.md cites the pages): 1 to 100 actions on distinct items,
//    4 MB in all, else ValidationException; every condition evaluated, and
//    any failed one cancels the whole (TransactionCanceledException, one
//    CancellationReason per action); a ConditionCheck only checks; a
//    ClientRequestToken makes a replay within 10 minutes succeed without
//    applying again, and the token with another request answer
//    IdempotentParameterMismatchException. A transaction runs alone (every
//    other request waits, in arrival order, and it waits for those in
//    flight), so it never meets a concurrent one: no TransactionConflict
//    locally (docs/testing.md says why nothing depends on it).
// 3. Every read stream (Query, Scan, a table's deletion) closes its LevelDB
//    iterator. dynalite 4.0's streams end an iterator with `return()`, a
//    method abstract-level iterators lack (theirs is `close()`), so each
//    Query or Scan left one open for the life of the process: on disk an
//    open iterator pins LevelDB's memtables and files, and the emulator grew
//    by about 60 kB a query (2.2 GB after 46,000 batch lines) and slowed.
// 4. In memory (no --path), keys and values are kept as strings, not as
//    Buffers: a small Buffer is a slice of a shared 8 kB pool slab, and a
//    stored one keeps its whole slab alive, so the emulator's memory grew by
//    about 22 kB a batch line (1.5 GB of ArrayBuffers after 65,000 lines).
process.on("uncaughtException", (err) => {
  if (err && (err.message === "aborted" || err.code === "ECONNRESET")) {
    console.error("dynalite: a client aborted its request; ignored");
    return;
  }
  console.error(err);
  process.exit(1);
});

const crc32 = require("buffer-crc32");
const { createHash } = require("crypto");
const argv = require("minimist")(process.argv.slice(2));
// Addition 4, before dynalite/db loads memory-level and takes its class.
const memoryLevel = require("memory-level");
const { MemoryLevel } = memoryLevel;
memoryLevel.MemoryLevel = class extends MemoryLevel {
  constructor(options) { super({ ...options, storeEncoding: "utf8" }); }
};
// dynalite keeps its store private: catch it as dynalite creates it, so a
// transaction's steps run in-process (no HTTP round trip per step).
const db = require("dynalite/db");
cacheParses(require("dynalite/db/conditionParser"));
cacheParses(require("dynalite/db/updateParser"));
const validations = require("dynalite/validations");
let store;
const createStore = db.create;
db.create = (options) => (store = createStore(options));
const server = require("dynalite")(argv);
require("./dynalite-streams.cjs")(store.db); // addition 3
const handle = server.listeners("request")[0];
server.removeAllListeners("request");

// The gate: shared for single-item requests, exclusive for a transaction.
let active = 0;
let exclusive = false;
const queue = [];
function pump() {
  while (queue.length > 0 && !exclusive) {
    const head = queue[0];
    if (head.excl) {
      if (active > 0) return;
      queue.shift();
      exclusive = true;
      head.run(() => { exclusive = false; pump(); });
      return;
    }
    queue.shift();
    active++;
    head.run(() => { active--; pump(); });
  }
}
function enter(excl, run) { queue.push({ excl, run }); pump(); }

server.on("request", (req, res) => {
  const target = String(req.headers["x-amz-target"] || "");
  if (target.endsWith(".TransactWriteItems")) {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => enter(true, (done) => {
      transact(Buffer.concat(chunks).toString()).then(
        ([status, body]) => { send(res, status, body); done(); },
        (err) => { send(res, 500, { __type: "com.amazonaws.dynamodb.v20120810#InternalServerError", message: String(err) }); done(); });
    }));
    return;
  }
  // Listened to from arrival: a client that gives up while its request
  // waits at the gate (an SDK timeout under load) must not hold the gate
  // forever, and its request is then not run at all.
  let state = "waiting";
  let release = null;
  const end = () => {
    if (state === "running") release();
    state = "ended";
  };
  res.on("finish", end);
  res.on("close", end);
  enter(false, (done) => {
    if (state === "ended") return done();
    state = "running";
    release = done;
    handle(req, res);
  });
});

function send(res, status, body) {
  const s = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader("Content-Type", "application/x-amz-json-1.0");
  res.setHeader("x-amz-crc32", crc32.unsigned(s)); // the SDK checks it, as DynamoDB sends it
  res.setHeader("Content-Length", Buffer.byteLength(s));
  res.end(s);
}

// call runs one DynamoDB operation on the store directly, validated as
// dynalite validates a request (expressions parsed), past the gate.
const modules = new Map();
function actionOf(op) {
  if (!modules.has(op)) {
    const action = op[0].toLowerCase() + op.slice(1);
    modules.set(op, { v: require("dynalite/validations/" + action), run: require("dynalite/actions/" + action) });
  }
  return modules.get(op);
}

// body is the wrapper's own object, built per step: validated in place.
function call(op, body) {
  const { v, run } = actionOf(op);
  return new Promise((resolve) => {
    let data;
    try {
      data = validations.checkTypes(body, v.types);
      validations.checkValidations(data, v.types, v.custom, store);
    } catch (err) {
      if (err.statusCode) return resolve({ status: err.statusCode, json: err.body });
      return resolve({ status: 500, json: { message: String(err) } });
    }
    run(store, data, (err, out) => {
      if (err && err.statusCode) return resolve({ status: err.statusCode, json: err.body });
      if (err) return resolve({ status: 500, json: { message: String(err) } });
      resolve({ status: 200, json: out || {} });
    });
  });
}

const keySchemas = new Map();
async function keyOf(table, item) {
  if (!keySchemas.has(table)) {
    const d = await call("DescribeTable", { TableName: table });
    if (d.status !== 200) throw Object.assign(new Error("describe " + table), { resp: d });
    keySchemas.set(table, d.json.Table.KeySchema.map((k) => k.AttributeName));
  }
  const key = {};
  for (const a of keySchemas.get(table)) key[a] = item[a];
  return key;
}

const validationErr = (message) => [400, { __type: "com.amazon.coral.validate#ValidationException", message }];

// validated checks one step's body as dynalite checks that operation's
// request (types, expressions parsed into data._condition): [data] or
// [null, [status, json]].
function validated(op, body) {
  const { v } = actionOf(op);
  try {
    const data = validations.checkTypes(body, v.types);
    validations.checkValidations(data, v.types, v.custom, store);
    return [data];
  } catch (err) {
    if (err.statusCode) return [null, [err.statusCode, err.body]];
    return [null, [500, { message: String(err) }]];
  }
}

// run applies a validated step on the store.
function run(op, data) {
  return new Promise((resolve) => actionOf(op).run(store, data, (err, out) => {
    if (err && err.statusCode) return resolve({ status: err.statusCode, json: err.body });
    if (err) return resolve({ status: 500, json: { message: String(err) } });
    resolve({ status: 200, json: out || {} });
  }));
}

// canonical is JSON with every object's keys sorted: the digest of a
// request whatever order the client wrote its maps in.
function canonical(x) {
  if (x === null || typeof x !== "object") return JSON.stringify(x);
  if (Array.isArray(x)) return "[" + x.map(canonical).join(",") + "]";
  return "{" + Object.keys(x).sort().map((k) => JSON.stringify(k) + ":" + canonical(x[k])).join(",") + "}";
}

// ClientRequestToken, as DynamoDB documents it: a token is remembered for
// 10 minutes after the first request that used it completed; within them
// the same request with it answers success without applying anything
// again, and another request with it IdempotentParameterMismatchException.
// Only transactions that were applied are remembered: DynamoDB documents
// the replay of a successful call, and a cancelled one changed nothing.
const TOKEN_TTL_MS = 10 * 60 * 1000;
const tokens = new Map(); // token -> { digest, at }
function pruneTokens(now) {
  for (const [t, e] of tokens) { // insertion order = completion order
    if (now - e.at < TOKEN_TTL_MS) break;
    tokens.delete(t);
  }
}

const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024; // aggregate size of the items

async function transact(text) {
  let data;
  try { data = JSON.parse(text); } catch (e) { return [400, { __type: "com.amazon.coral.service#SerializationException" }]; }
  const items = data.TransactItems;
  if (!Array.isArray(items) || items.length === 0 || items.length > 100) {
    return validationErr("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length between 1 and 100");
  }
  const token = data.ClientRequestToken;
  let digest = null;
  if (token !== undefined && token !== null) {
    if (typeof token !== "string" || token.length < 1 || token.length > 36) {
      return validationErr("1 validation error detected: Value at 'clientRequestToken' failed to satisfy constraint: Member must have length between 1 and 36");
    }
    const rest = { ...data };
    delete rest.ClientRequestToken;
    // Kept as a hash: the SDK gives every transaction a token, so 10
    // minutes of a batch run's transactions are remembered.
    digest = createHash("sha256").update(canonical(rest)).digest("base64");
    pruneTokens(Date.now());
    const seen = tokens.get(token);
    if (seen) {
      if (seen.digest !== digest) {
        return [400, { __type: "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
          message: "Request parameters do not match the request that used this ClientRequestToken" }];
      }
      return [200, {}]; // applied already: nothing is applied again
    }
  }
  // 1. Every step validated as its own operation is, before anything is
  // read: a malformed step refuses the whole request (ValidationException).
  const steps = [];
  const seen = new Set();
  let size = 0;
  for (const it of items) {
    const kinds = Object.keys(it || {});
    if (kinds.length !== 1) return validationErr("TransactItems can only contain one of Check, Put, Update or Delete");
    const kind = kinds[0];
    const p = it[kind] || {};
    const common = { TableName: p.TableName, ConditionExpression: p.ConditionExpression,
      ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues };
    let op, body, key;
    let absent = false; // the condition proves the item did not exist
    if (kind === "Put") {
      if (!p.Item || typeof p.Item !== "object") return validationErr("The parameter 'Item' is required but was not present in the request");
      try {
        key = await keyOf(p.TableName, p.Item);
      } catch (err) {
        if (err.resp) return [err.resp.status, err.resp.json]; // no such table: ResourceNotFoundException
        throw err;
      }
      op = "PutItem"; body = { ...common, Item: p.Item };
      const m = /^attribute_not_exists\((#?\w+)\)$/.exec(p.ConditionExpression || "");
      const attr = m && (m[1].startsWith("#") ? (p.ExpressionAttributeNames || {})[m[1]] : m[1]);
      absent = attr !== undefined && attr !== null && Object.prototype.hasOwnProperty.call(key, attr);
    } else if (kind === "Update") {
      key = p.Key; op = "UpdateItem"; body = { ...common, Key: p.Key, UpdateExpression: p.UpdateExpression };
    } else if (kind === "Delete") {
      key = p.Key; op = "DeleteItem"; body = { ...common, Key: p.Key };
    } else if (kind === "ConditionCheck") {
      // Only checked, never written: validated as a conditional delete
      // (the same members), and never run.
      if (!p.ConditionExpression) return validationErr("The parameter 'ConditionExpression' is required but was not present in the request");
      key = p.Key; op = null; body = { ...common, Key: p.Key };
    } else {
      return validationErr("unknown transact item " + kind);
    }
    const id = p.TableName + "\u0000" + canonical(key || {});
    if (seen.has(id)) return validationErr("Transaction request cannot include multiple operations on one item");
    seen.add(id);
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    // What restores an applied write when a later action is refused: the
    // write returns the item it replaced (none: undone by a delete). Not
    // needed by the last action, nor by a put that proves absence.
    if (op && !absent && steps.length < items.length - 1) body.ReturnValues = "ALL_OLD";
    const [v, bad] = validated(op || "DeleteItem", body);
    if (bad) return bad;
    size += db.itemSize(body.Item || body.Key || {});
    if (body.ExpressionAttributeValues) size += db.itemSize(body.ExpressionAttributeValues);
    steps.push({ op, data: v, key, table: p.TableName, returnOld: p.ReturnValuesOnConditionCheckFailure === "ALL_OLD" });
  }
  if (size > MAX_TRANSACTION_BYTES) {
    return validationErr("Transaction size (" + size + " bytes) exceeds the 4 MB limit on the aggregate size of its items");
  }
  // 2. In order, each write with its own condition on the store (the gate
  // keeps every other request out meanwhile), each check read and
  // evaluated. At the first refused action the applied writes are undone,
  // and the conditions of the actions after it are evaluated against the
  // items as they are: DynamoDB reports every failed one.
  const read = async (s) => {
    const g = await call("GetItem", { TableName: s.table, Key: s.key, ConsistentRead: true });
    return g.status === 200 ? [g.json.Item] : [null, [g.status, g.json]];
  };
  const undo = async (n) => {
    for (let j = n - 1; j >= 0; j--) {
      const s = steps[j];
      if (!s.op) continue;
      const u = s.old ? await call("PutItem", { TableName: s.table, Item: s.old }) : await call("DeleteItem", { TableName: s.table, Key: s.key });
      if (u.status !== 200) throw new Error("transaction rollback failed: " + JSON.stringify(u.json));
    }
  };
  const reasons = steps.map(() => ({ Code: "None" }));
  const refuse = (i, item) => {
    reasons[i] = { Code: "ConditionalCheckFailed", Message: "The conditional request failed" };
    if (steps[i].returnOld && item) reasons[i].Item = item;
  };
  let refused = -1;
  for (let i = 0; i < steps.length && refused < 0; i++) {
    const s = steps[i];
    if (!s.op) { // ConditionCheck: read and evaluated, never written
      const [item, bad] = await read(s);
      if (bad) { await undo(i); return bad; }
      if (db.checkConditional(s.data, item)) { await undo(i); refuse(i, item); refused = i; }
      continue;
    }
    const r = await run(s.op, s.data);
    if (r.status === 200) {
      if (s.data.ReturnValues === "ALL_OLD") s.old = r.json.Attributes;
      continue;
    }
    await undo(i);
    if (!String(r.json.__type || "").endsWith("#ConditionalCheckFailedException")) return [r.status, r.json];
    const [item, bad] = s.returnOld ? await read(s) : [null];
    if (bad) return bad;
    refuse(i, item);
    refused = i;
  }
  if (refused >= 0) {
    for (let j = refused + 1; j < steps.length; j++) {
      const [item, bad] = await read(steps[j]);
      if (bad) return bad;
      if (db.checkConditional(steps[j].data, item)) refuse(j, item);
    }
    return [400, {
      __type: "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
      Message: "Transaction cancelled, please refer cancellation reasons for specific reasons [" + reasons.map((x) => x.Code).join(", ") + "]",
      CancellationReasons: reasons,
    }];
  }
  if (digest !== null) tokens.set(token, { digest, at: Date.now() });
  return [200, {}];
}

// cacheParses memoises a dynalite expression parser (condition, update):
// parsing is a tenth of the emulator's time, and the service sends a few
// dozen expression texts with ever new values. A parse is cached by text,
// attribute names and the values' types, made against stand-ins for the
// values; a hit returns a copy of the tree with the request's own values in
// place of the stand-ins and marks the same names and values used, exactly
// as a fresh parse does. Texts whose parse looks at a value's content
// (BETWEEN bounds, attribute_type names) and parses that fail are not cached.
function cacheParses(parser) {
  const parse = parser.parse;
  const cache = new Map();
  parser.parse = (text, options) => {
    const ctx = options.context;
    if (/between|attribute_type/i.test(text)) return parse(text, options);
    const names = ctx.attrNames || {};
    const vals = ctx.attrVals || {};
    const valKeys = Object.keys(vals).sort(); // the SDK sends maps in any order
    const key = text + "\u0000" + Object.keys(names).sort().map((k) => k + "=" + names[k]).join(",") + "\u0000" +
      valKeys.map((k) => k + ":" + Object.keys(vals[k] || {}).join("|")).join(",") + "\u0000" + (ctx.isKeyCondition ? 1 : 0);
    let hit = cache.get(key);
    if (!hit) {
      const standIns = new Map();
      const sVals = {};
      for (const k of valKeys) {
        sVals[k] = vals[k] && typeof vals[k] === "object" ? { ...vals[k] } : vals[k];
        if (sVals[k] && typeof sVals[k] === "object") standIns.set(sVals[k], k);
      }
      const unusedNames = {}, unusedVals = {};
      for (const k of Object.keys(names)) unusedNames[k] = true;
      for (const k of valKeys) unusedVals[k] = true;
      const result = parse(text, { context: { ...ctx, attrVals: sVals, unusedAttrNames: unusedNames, unusedAttrVals: unusedVals } });
      if (!result || typeof result !== "object") return parse(text, options); // an error: say it as dynalite does
      hit = { result, standIns, usedNames: Object.keys(names).filter((k) => !unusedNames[k]),
        usedVals: valKeys.filter((k) => !unusedVals[k]) };
      if (cache.size > 10000) cache.clear();
      cache.set(key, hit);
    }
    if (ctx.unusedAttrNames) for (const k of hit.usedNames) delete ctx.unusedAttrNames[k];
    if (ctx.unusedAttrVals) for (const k of hit.usedVals) delete ctx.unusedAttrVals[k];
    return copyTree(hit.result, hit.standIns, vals);
  };
}

function copyTree(x, standIns, vals) {
  if (x === null || typeof x !== "object") return x;
  const k = standIns.get(x);
  if (k !== undefined) return vals[k];
  if (Array.isArray(x)) return x.map((y) => copyTree(y, standIns, vals));
  const o = Object.getPrototypeOf(x) === null ? Object.create(null) : {};
  for (const f of Object.keys(x)) o[f] = copyTree(x[f], standIns, vals);
  return o;
}

if (process.pid === 1) process.on("SIGINT", process.exit);
server.listen(argv.port || 4567, argv.host || undefined, () => {
  const a = server.address();
  console.log("Dynalite listening at: http://%s:%s", argv.host || "localhost", a.port);
});
