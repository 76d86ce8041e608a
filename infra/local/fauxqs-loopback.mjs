// Starts fauxqs (SQS + S3 emulator) bound to 127.0.0.1 only. fauxqs' own CLI
// listens on 0.0.0.0, which would expose the emulator to the network.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (args[0] && typeof args[0] === "object") args[0] = { ...args[0], host: "127.0.0.1" };
  return listen.apply(this, args);
};

const { startFauxqs } = await import("fauxqs");
const server = await startFauxqs({ logger: process.env.FAUXQS_LOGGER === "true" });
// The local stack waits for this line: it proves this process holds the port.
console.log(`fauxqs listening on 127.0.0.1:${process.env.FAUXQS_PORT}`);
const stop = () => server.stop().finally(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
