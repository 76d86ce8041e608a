// Test instrumentation, loaded before paycheckout.js: tracks the window's registered listeners the
// way the DOM does (one entry per type + listener + capture) and records CSP violations.
(() => {
  const reg = [];
  const capture = (o) => (typeof o === 'boolean' ? o : !!(o && o.capture));
  const find = (type, fn, o) => reg.findIndex((r) => r[0] === type && r[1] === fn && r[2] === capture(o));
  const add = window.addEventListener, remove = window.removeEventListener;
  window.addEventListener = function (type, fn, o) {
    if (fn && find(type, fn, o) < 0) reg.push([type, fn, capture(o)]);
    return add.call(this, type, fn, o);
  };
  window.removeEventListener = function (type, fn, o) {
    const i = find(type, fn, o);
    if (i >= 0) reg.splice(i, 1);
    return remove.call(this, type, fn, o);
  };
  window.listenerCount = (type) => reg.filter((r) => r[0] === type).length;
  window.cspViolations = [];
  document.addEventListener('securitypolicyviolation', (e) => {
    window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
  });
})();
