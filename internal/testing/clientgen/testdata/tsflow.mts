// A merchant's program written against the types openapi-typescript
// generates from docs/openapi.yaml, calling the API with openapi-fetch. The
// test type-checks it with tsc --strict and runs it on the local stack; it
// prints what it observed as JSON, the same summary as goflow.go.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Problem = components["schemas"]["Problem"];
type Summary = Record<string, unknown> & {
  amounts: Record<string, string>;
  problems: Record<string, { status: number; type: string; code: string; retryAfter?: number }>;
};

const base = process.env.PAYREQ_API!;
const client = (key: string) => createClient<paths>({ baseUrl: base, headers: { "X-API-Key": key } });
const api = client(process.env.PAYREQ_KEY!);

function fail(what: string, res: { status: number }, body: unknown): never {
  throw new Error(`${what}: ${res.status} ${JSON.stringify(body)}`);
}

function problem(p: Problem) {
  return { status: p.status, type: p.type, code: p.code ?? "" };
}

async function create(amount: string, unit: string, key?: string) {
  const { data, error, response } = await api.POST("/payment-requests", {
    params: { header: key === undefined ? {} : { "Idempotency-Key": key } },
    body: { amount, unit, recipientName: "Coffee Corner", referenceId: `order-${unit}` },
  });
  if (!data) fail(`create ${amount} ${unit}`, response, error);
  return { data, response };
}

async function status(id: number) {
  const { data, error, response } = await api.GET("/payment-requests/status/{id}", { params: { path: { id } } });
  if (!data) fail(`status ${id}`, response, error);
  return data;
}

const s: Summary = { amounts: {}, problems: {} };

// Create with an Idempotency-Key, then the same again: the replay.
const key = `order-1042-${process.env.PAYREQ_RUN}`;
const first = await create("25.00", "EUR", key);
const again = await create("25.00", "EUR", key);
s.requestId = first.data.id;
s.amount = String(first.data.amount);
s.replayed = again.response.headers.get("Idempotent-Replayed") === "true";
s.replayedSameId = again.data.id === first.data.id;

const before = await status(first.data.id);
s.statusTransactionNull =
  before.transactionId === null && before.transactionNumber === null && before.transactionStatusId === null;

{
  const { data, error, response } = await api.POST("/payment-requests/{id}/checkout-session", {
    params: { path: { id: first.data.id } },
    body: {},
  });
  if (!data) fail("checkout session", response, error);
  s.sessionToken = data.token !== "";
  s.paymentUrl = data.paymentUrl;
}

// Host-to-host: a sandbox card that approves, paying the request.
{
  const { data, error, response } = await api.POST("/payments/h2h/{n}", {
    params: { path: { n: 1 }, header: { "Idempotency-Key": `pay-${key}` } },
    body: {
      name: "Ann Lee", email: "ann@example.com", phoneNumber: "4915112345678", address: "1 Market Street",
      city: "Berlin", state: "BE", postalCode: "10115", country: "DE", paymentRequestId: first.data.id,
      card: { holderName: "Ann Lee", number: "4111111111111111", expiry: "12/39", cvc: "123" },
    },
  });
  if (!data) fail("h2h payment", response, error);
  s.paymentId = data.paymentId;
  s.transactionId = data.transactionId;
  s.transactionNumber = data.transactionNumber;
  s.transactionStatusId = data.transactionStatusId;
}

const paid = await status(first.data.id);
s.paidStatusId = paid.paymentRequestStatusId;
s.paidTransactionId = paid.transactionId;

// Lookups: the card payment's status and GET /transactions/{id} by id and
// by transaction number.
{
  const card = await api.GET("/payments/creditCard/status/{paymentId}", {
    params: { path: { paymentId: Number(s.paymentId) } },
  });
  if (!card.data) fail("card status", card.response, card.error);
  s.cardStatusId = card.data.transactionStatusId;
  const byId = await api.GET("/transactions/{id}", { params: { path: { id: String(s.paymentId) } } });
  if (!byId.data) fail("transaction by id", byId.response, byId.error);
  s.txById = byId.data.id;
  s.txByIdAmount = String(byId.data.amount);
  const byNumber = await api.GET("/transactions/{id}", { params: { path: { id: String(s.transactionNumber) } } });
  if (!byNumber.data) fail("transaction by number", byNumber.response, byNumber.error);
  s.txByNumber = byNumber.data.id;
}

// Cancel another request.
{
  const other = await create("10.00", "EUR");
  const { data, error, response } = await api.POST("/payment-requests/{id}/cancel", {
    params: { path: { id: other.data.id } },
    body: {},
  });
  if (!data) fail("cancel", response, error);
  s.cancelledId = data.id;
  s.cancelledStatusId = data.paymentRequestStatusId;
}

// Amounts a double holds exactly (docs/openapi.md), as JavaScript decodes
// them.
for (const [amount, unit] of [["1234567.89", "EUR"], ["16777217", "JPY"], ["9999999999999.99", "EUR"], ["999999999999999", "JPY"]]) {
  const created = await create(amount, unit);
  s.amounts[`${amount} ${unit}`] = String((await status(created.data.id)).amount);
}

// Problems, each decoded as the generated type of its status.
{
  const bad = await api.POST("/payment-requests", { body: { amount: "0", unit: "EUR" } });
  if (bad.response.status !== 400 || !bad.error) fail("want a 400 problem", bad.response, bad.data);
  s.problems["400"] = problem(bad.error);
  const unauth = await client("prk_test_not-a-key").GET("/payment-requests/status/{id}", {
    params: { path: { id: first.data.id } },
  });
  if (unauth.response.status !== 401 || !unauth.error) fail("want a 401 problem", unauth.response, unauth.data);
  s.problems["401"] = problem(unauth.error);
  const missing = await api.GET("/transactions/{id}", { params: { path: { id: "1" } } });
  if (missing.response.status !== 404 || !missing.error) fail("want a 404 problem", missing.response, missing.data);
  s.problems["404"] = problem(missing.error);
  const limited = client(process.env.PAYREQ_LIMITED_KEY!);
  for (let i = 0; i < 10; i++) {
    const res = await limited.GET("/payment-requests/status/{id}", { params: { path: { id: 1 } } });
    if (res.response.status === 429 && res.error) {
      s.problems["429"] = { ...problem(res.error), retryAfter: Number(res.response.headers.get("Retry-After")) };
      break;
    }
  }
}

process.stdout.write(JSON.stringify(s) + "\n");
