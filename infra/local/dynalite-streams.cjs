// The third addition of dynalite-keepalive.cjs, in its own file so that a
// test can measure it. closeIteratorsOfStreams replaces dynalite's two
// stream makers (the prefixed sub-databases call them on the main database
// at each read) with ones that close their iterator when the stream ends or
// is destroyed: a Readable destroys itself after its end, so both paths run
// _destroy.
module.exports = function closeIteratorsOfStreams(levelDb) {
  const { Readable } = require("stream");
  for (const [stream, open] of [["createValueStream", "values"], ["createKeyStream", "keys"]]) {
    levelDb[stream] = function (options) {
      const iterator = levelDb[open](options);
      return new Readable({
        objectMode: true,
        read() {
          iterator.next().then((v) => this.push(v === undefined ? null : v), (err) => this.destroy(err));
        },
        destroy(err, callback) {
          iterator.close().then(() => callback(err), () => callback(err));
        },
      });
    };
  }
};
