// Merchant page of the end-to-end tests (testdata/e2e-merchant.html). Loaded before paycheckout.js:
// counts the listeners registered on window and document (one entry per target + type + listener
// + capture, as the DOM does), records CSP violations and every PayCheckout callback.
//
// The payment URL comes from the merchant back end (the test), which passes it to E.open.
(() => {
  'use strict';
  const reg = [];
  const capture = (o) => (typeof o === 'boolean' ? o : !!(o && o.capture));
  const find = (target, type, fn, o) =>
    reg.findIndex((r) => r.target === target && r.type === type && r.fn === fn && r.capture === capture(o));
  for (const [name, target] of [['window', window], ['document', document]]) {
    const add = target.addEventListener, remove = target.removeEventListener;
    target.addEventListener = function (type, fn, o) {
      if (fn && find(name, type, fn, o) < 0) reg.push({ target: name, type, fn, capture: capture(o) });
      return add.call(this, type, fn, o);
    };
    target.removeEventListener = function (type, fn, o) {
      const i = find(name, type, fn, o);
      if (i >= 0) reg.splice(i, 1);
      return remove.call(this, type, fn, o);
    };
  }

  const violations = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sourceFile + ':' + e.lineNumber);
  });

  const events = (window.__events = []);
  const frame = () => document.querySelector('iframe[data-paycheckout]');
  const rec = (name) => (data) => {
    events.push({ name, data: JSON.parse(JSON.stringify(data === undefined ? null : data)), t: performance.now(), frameInDom: !!frame() });
  };

  const E = (window.E = {
    t0: 0,
    violations,
    frame,
    overlay: () => document.querySelector('[data-paycheckout=backdrop]'),
    // Listeners of the types PayCheckout may add: "window message", "window keydown", ...
    listeners() {
      const out = {};
      for (const t of ['window', 'document']) for (const ty of ['message', 'keydown']) out[t + ' ' + ty] = 0;
      for (const r of reg) {
        const k = r.target + ' ' + r.type;
        if (k in out) out[k]++;
      }
      return out;
    },
    count: (name) => events.filter((e) => e.name === name).length,
    // Opens PayCheckout; returns the error message of init, or ''.
    open(opts) {
      const o = Object.assign({
        mode: 'inline',
        onReady: rec('onReady'),
        onSuccess: rec('onSuccess'),
        onFailure: rec('onFailure'),
        onPending: rec('onPending'),
        onCancel: rec('onCancel')
      }, opts);
      if (o.mode === 'inline' && !o.containerId) o.containerId = 'pay-here';
      try {
        E.t0 = performance.now();
        window.PayCheckout.init(o);
      } catch (e) {
        return String(e && e.message);
      }
      return '';
    },
    // Milliseconds from init to onReady, or -1.
    readyMs() {
      const r = events.find((e) => e.name === 'onReady');
      return r ? r.t - E.t0 : -1;
    }
  });
})();
