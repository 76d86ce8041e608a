// Starts dynalite's CLI (same arguments). dynalite does not handle a request
// whose client hangs up mid-body: node raises "Error: aborted" as an
// uncaught exception and the emulator dies, taking every table with it. A
// cancelled AWS SDK call does exactly that (a Lambda timing out, a test
// cancelling a context). DynamoDB itself just drops such a request: so does
// this wrapper; anything else still ends the process.
process.on("uncaughtException", (err) => {
  if (err && (err.message === "aborted" || err.code === "ECONNRESET")) {
    console.error("dynalite: a client aborted its request; ignored");
    return;
  }
  console.error(err);
  process.exit(1);
});
require("dynalite/cli.js");
