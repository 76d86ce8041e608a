// Test harness of the merchant page. ?checkout=<origin>&other=<origin>
(() => {
  const q = new URLSearchParams(location.search);
  const T = (window.T = {
    checkout: q.get('checkout'),
    other: q.get('other'),
    calls: [], // callbacks of PayCheckout, in order
    seen: [], // every message this window received
    loaded: [], // windows of fake checkout pages that have loaded
    frame: () => document.querySelector('iframe[data-paycheckout]'),
    overlay: () => document.querySelector('[data-paycheckout=backdrop]'),
    url: (base) => (base || T.checkout) + '/checkout?requestId=42&token=tok-123',
    rec: (name) => (data) => {
      T.calls.push({ name, data: JSON.parse(JSON.stringify(data)), frameInDom: !!T.frame() });
    },
    init(extra) {
      PayCheckout.init(Object.assign({
        paymentUrl: T.url(),
        onReady: T.rec('onReady'),
        onSuccess: T.rec('onSuccess'),
        onFailure: T.rec('onFailure'),
        onPending: T.rec('onPending'),
        onCancel: T.rec('onCancel')
      }, extra || {}));
    },
    initError(opts) {
      try {
        PayCheckout.init(opts);
      } catch (e) {
        return e instanceof Error ? e.message : 'not an Error: ' + String(e);
      }
      return '';
    },
    // Asks a fake checkout window to post these messages to this window.
    send(win, msgs) { win.postMessage({ cmd: 'post', msgs }, '*'); },
    // Asks a fake checkout window to navigate itself.
    go(win, url) { win.postMessage({ cmd: 'go', url }, '*'); },
    addFrame(src) {
      const f = document.createElement('iframe');
      f.className = 'rogue';
      f.src = src;
      document.body.appendChild(f);
      return f;
    },
    isLoaded: (win) => T.loaded.includes(win),
    loads: (win) => T.loaded.filter((w) => w === win).length,
    count: (name) => T.calls.filter((c) => c.name === name).length,
    seenCount: (pred) => T.seen.filter(pred).length
  });
  // A handler property, not addEventListener: the listener count stays PayCheckout's alone.
  window.onmessage = (e) => {
    T.seen.push({ origin: e.origin, data: e.data });
    if (e.data && e.data.fake === 'loaded') T.loaded.push(e.source);
  };
})();
