// Starts dynalite (same arguments as its CLI) with two additions.
//
// 1. dynalite does not handle a request whose client hangs up mid-body: node
//    raises "Error: aborted" as an uncaught exception and the emulator dies,
//    taking every table with it. A cancelled AWS SDK call does exactly that
//    (a Lambda timing out, a test cancelling a context). DynamoDB itself just
//    drops such a request: so does this wrapper; anything else still ends the
//    process.
// 2. TransactWriteItems, which dynalite lacks: the service writes a payment
//    request and its transaction together. A transaction runs alone (every
//    other request waits, in arrival order, and it waits for those in
//    flight); it applies each write with its own condition on dynalite's
//    store, each after a snapshot of its item, and on the first failed
//    condition restores the applied items and answers
//    TransactionCanceledException with per-item CancellationReasons, as
//    DynamoDB does. All-or-nothing as seen by every client.
process.on("uncaughtException", (err) => {
  if (err && (err.message === "aborted" || err.code === "ECONNRESET")) {
    console.error("dynalite: a client aborted its request; ignored");
    return;
  }
  console.error(err);
  process.exit(1);
});

const crc32 = require("buffer-crc32");
const argv = require("minimist")(process.argv.slice(2));
// dynalite keeps its store private: catch it as dynalite creates it, so a
// transaction's steps run in-process (no HTTP round trip per step).
const db = require("dynalite/db");
const validations = require("dynalite/validations");
let store;
const createStore = db.create;
db.create = (options) => (store = createStore(options));
const server = require("dynalite")(argv);
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
function call(op, body) {
  const action = op[0].toLowerCase() + op.slice(1);
  const v = require("dynalite/validations/" + action);
  return new Promise((resolve) => {
    let data;
    try {
      data = validations.checkTypes(JSON.parse(JSON.stringify(body)), v.types);
      validations.checkValidations(data, v.types, v.custom, store);
    } catch (err) {
      if (err.statusCode) return resolve({ status: err.statusCode, json: err.body });
      return resolve({ status: 500, json: { message: String(err) } });
    }
    require("dynalite/actions/" + action)(store, data, (err, out) => {
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

const errType = (j) => String(j.__type || "").split("#").pop();

async function transact(text) {
  let data;
  try { data = JSON.parse(text); } catch (e) { return [400, { __type: "com.amazon.coral.service#SerializationException" }]; }
  const items = data.TransactItems || [];
  if (items.length === 0 || items.length > 100) {
    return [400, { __type: "com.amazon.coral.validate#ValidationException", message: "TransactItems must have 1 to 100 items" }];
  }
  const steps = [];
  const seen = new Set();
  for (const it of items) {
    const [kind] = Object.keys(it);
    const p = it[kind];
    const common = { TableName: p.TableName, ConditionExpression: p.ConditionExpression,
      ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues };
    let op, body, key;
    if (kind === "Put") {
      key = await keyOf(p.TableName, p.Item);
      op = "PutItem"; body = { ...common, Item: p.Item };
    } else if (kind === "Update") {
      key = p.Key; op = "UpdateItem"; body = { ...common, Key: p.Key, UpdateExpression: p.UpdateExpression };
    } else if (kind === "Delete") {
      key = p.Key; op = "DeleteItem"; body = { ...common, Key: p.Key };
    } else if (kind === "ConditionCheck") {
      key = p.Key; op = "UpdateItem"; body = { ...common, Key: p.Key };
    } else {
      return [400, { __type: "com.amazon.coral.validate#ValidationException", message: "unknown transact item " + kind }];
    }
    const id = p.TableName + "\u0000" + JSON.stringify(key);
    if (seen.has(id)) {
      return [400, { __type: "com.amazon.coral.validate#ValidationException",
        message: "Transaction request cannot include multiple operations on one item" }];
    }
    seen.add(id);
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    steps.push({ op, body, key, table: p.TableName, returnOld: p.ReturnValuesOnConditionCheckFailure === "ALL_OLD" });
  }
  const undo = async (n) => {
    for (let i = n - 1; i >= 0; i--) {
      const s = steps[i];
      const r = s.old ? await call("PutItem", { TableName: s.table, Item: s.old }) : await call("DeleteItem", { TableName: s.table, Key: s.key });
      if (r.status !== 200) throw new Error("transaction rollback failed: " + JSON.stringify(r.json));
    }
  };
  for (let i = 0; i < steps.length; i++) {
    // The snapshot restores an applied step when a later one fails (and
    // answers ALL_OLD): the last step needs one only for ALL_OLD.
    if (i < steps.length - 1 || steps[i].returnOld) {
      const g = await call("GetItem", { TableName: steps[i].table, Key: steps[i].key, ConsistentRead: true });
      if (g.status !== 200) {
        await undo(i);
        return [g.status, g.json];
      }
      steps[i].old = g.json.Item;
    }
    const r = await call(steps[i].op, steps[i].body);
    if (r.status === 200) continue;
    await undo(i);
    if (errType(r.json) !== "ConditionalCheckFailedException") return [r.status, r.json];
    const reasons = steps.map((s, j) => {
      if (j !== i) return { Code: "None" };
      const reason = { Code: "ConditionalCheckFailed", Message: "The conditional request failed" };
      if (s.returnOld && s.old) reason.Item = s.old;
      return reason;
    });
    return [400, {
      __type: "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
      Message: "Transaction cancelled, please refer cancellation reasons for specific reasons [" + reasons.map((x) => x.Code).join(", ") + "]",
      CancellationReasons: reasons,
    }];
  }
  return [200, {}];
}

if (process.pid === 1) process.on("SIGINT", process.exit);
server.listen(argv.port || 4567, argv.host || undefined, () => {
  const a = server.address();
  console.log("Dynalite listening at: http://%s:%s", argv.host || "localhost", a.port);
});
