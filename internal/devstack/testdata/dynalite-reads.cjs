// Measures what dynalite's reads leave behind: a store on disk (argv[2]),
// 200 items, then argv[3] reads of two items each, a write after each read,
// through dynalite's own streams or (argv[4] = "fixed") the wrapper's. Prints
// the heap still used after a full collection, in bytes. Run from
// infra/local with --expose-gc.
const path = require("path");
const local = process.cwd();
const dynaliteDb = require(path.join(local, "node_modules/dynalite/db"));
const [dir, reads, variant] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const store = dynaliteDb.create({ path: dir });
if (variant === "fixed") require(path.join(local, "dynalite-streams.cjs"))(store.db);
const items = store.getItemDb("t");
const put = (k, v) => new Promise((ok, fail) => items.put(k, v, (err) => (err ? fail(err) : ok())));
const readTwo = () => new Promise((ok, fail) => {
  const s = items.createValueStream({ gte: "k1" });
  let n = 0;
  s.on("data", () => { if (++n === 2) { s.destroy(); ok(); } });
  s.on("end", ok);
  s.on("error", fail);
});
(async () => {
  for (let i = 0; i < 200; i++) await put("k" + i, { body: "x".repeat(400) });
  for (let i = 0; i < reads; i++) {
    await readTwo();
    await put("k" + (i % 200), { body: "y".repeat(400), i });
  }
  await new Promise((ok) => setTimeout(ok, 100)); // closes settle
  global.gc();
  console.log(process.memoryUsage().heapUsed);
})().catch((err) => { console.error(err); process.exit(1); });
