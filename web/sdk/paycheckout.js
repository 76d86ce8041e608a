/*! PayCheckout v1 - embedded checkout component. Types: /paycheckout.d.ts */
(function (w, d) {
  'use strict';
  if (w.PayCheckout) return; // loaded twice: keep the first copy and its state

  // message type -> [callback name, payload fields (all strings)]
  var TYPES = {
    'payment.ready': ['onReady', []],
    'payment.success': ['onSuccess', ['url', 'requestId', 'paymentId']],
    'payment.failure': ['onFailure', ['url', 'requestId', 'paymentId']],
    'payment.pending': ['onPending', ['url', 'requestId']],
    'payment.cancel': ['onCancel', []]
  };
  var CALLBACKS = ['onSuccess', 'onFailure', 'onCancel', 'onPending', 'onReady'];
  var LOCAL = /^(localhost|127\.0\.0\.1|\[::1\])$/;
  // Merchant API keys start with prk_test_ or prk_live_ (the service's key format).
  var API_KEY = /prk_(test|live)_/i;
  // Upper bound of a reported content height (px): a page far taller is broken, not content.
  var MAX_HEIGHT = 10000;
  var cur = null; // the open session

  function fail(msg) {
    throw new Error('PayCheckout: ' + msg);
  }

  function css(el, props) {
    // CSSOM assignments are allowed under a strict style-src CSP; style attributes are not.
    for (var k in props) el.style[k] = props[k];
    return el;
  }

  function el(tag, props) {
    var e = d.createElement(tag);
    return css(e, props || {});
  }

  // Validates a posted message and returns a clean payload, or null.
  function payload(m) {
    if (!m || typeof m !== 'object' || m.source !== 'paycheckout' || typeof m.type !== 'string' ||
        !Object.prototype.hasOwnProperty.call(TYPES, m.type)) return null;
    var data = m.data;
    if (!data || typeof data !== 'object' || Array.isArray(data)) return null;
    var out = {}, f = TYPES[m.type][1];
    for (var i = 0; i < f.length; i++) {
      if (typeof data[f[i]] !== 'string') return null;
      out[f[i]] = data[f[i]];
    }
    return out;
  }

  function close(s) {
    if (!s || cur !== s) return;
    cur = null;
    w.removeEventListener('message', s.onMessage);
    if (s.onKey) w.removeEventListener('keydown', s.onKey, true);
    if (s.root.parentNode) s.root.parentNode.removeChild(s.root);
    if (s.modal) {
      d.body.style.overflow = s.overflow;
      for (var i = 0; i < s.inert.length; i++) s.inert[i].inert = false;
      var f = s.focus;
      if (f && f.focus && d.contains(f)) f.focus();
    }
  }

  // Calls the terminal callback exactly once, then removes the component.
  function finish(s, name, data) {
    if (s.done) return;
    s.done = true;
    var cb = s.o[name];
    try {
      if (cb) cb(data);
    } finally {
      close(s);
    }
  }

  function init(o) {
    if (!o || typeof o !== 'object') fail('init(options) needs an options object');
    var mode = o.mode == null ? 'inline' : o.mode;
    if (mode !== 'inline' && mode !== 'modal') fail('mode must be "inline" or "modal"');
    if (typeof o.paymentUrl !== 'string' || !o.paymentUrl) fail('paymentUrl is required');
    var u;
    try {
      u = new URL(o.paymentUrl, location.href);
    } catch (e) {
      fail('paymentUrl is not a valid URL');
    }
    if (u.protocol !== 'https:' && !(u.protocol === 'http:' && LOCAL.test(u.hostname))) {
      fail('paymentUrl must use https');
    }
    if (!u.searchParams.get('requestId') || !u.searchParams.get('token')) {
      fail('paymentUrl must carry the requestId and token query parameters');
    }
    if (/api[-_]?key/i.test(u.search)) fail('paymentUrl must never carry the merchant API key');
    // A value shaped like a merchant API key (prk_test_..., prk_live_...) in any parameter, under any
    // name, would put the key in the iframe's address; refuse it without echoing it.
    u.searchParams.forEach(function (v, k) {
      if (API_KEY.test(v) || API_KEY.test(k)) fail('paymentUrl must never carry the merchant API key');
    });
    if (API_KEY.test(decodeURIComponent(u.hash))) fail('paymentUrl must never carry the merchant API key');
    var host = null;
    if (!d.body) fail('call init once the document body exists');
    if (mode === 'inline') {
      if (!o.containerId) fail('containerId is required when mode is "inline"');
      host = d.getElementById(o.containerId);
      if (!host) fail('no element with id "' + o.containerId + '"');
    }
    for (var i = 0; i < CALLBACKS.length; i++) {
      if (o[CALLBACKS[i]] != null && typeof o[CALLBACKS[i]] !== 'function') fail(CALLBACKS[i] + ' must be a function');
    }
    // A BCP 47 language tag (e.g. "hi", "pt-BR"): the page's language instead of the shopper's
    // Accept-Language; unsupported languages fall back to it.
    if (o.locale != null && (typeof o.locale !== 'string' || !/^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$/.test(o.locale))) {
      fail('locale must be a language tag such as "de" or "pt-BR"');
    }
    var width = o.width == null ? '480px' : String(o.width);
    var height = o.height == null ? '700px' : String(o.height);

    destroy(); // one session at a time

    u.searchParams.set('embedded', 'true');
    u.searchParams.set('origin', location.origin);
    // Esc inside the iframe never reaches this page: tell the checkout it is
    // in a modal, so it reports Esc as payment.cancel itself.
    if (mode === 'modal') u.searchParams.set('modal', 'true');
    if (o.locale) u.searchParams.set('locale', o.locale);

    var frame = el('iframe', {
      display: 'block', border: '0', width: mode === 'modal' ? '100%' : width, maxWidth: '100%',
      height: height, maxHeight: mode === 'modal' ? 'calc(100vh - 80px)' : '', background: 'transparent'
    });
    frame.title = 'Secure checkout';
    frame.allow = 'payment';
    frame.setAttribute('sandbox', 'allow-scripts allow-same-origin allow-forms allow-popups allow-popups-to-escape-sandbox');
    frame.src = u.href;

    var s = { o: o, frame: frame, origin: u.origin, modal: mode === 'modal', done: false, ready: false, root: frame, inert: [] };

    s.onMessage = function (e) {
      if (cur !== s || e.source !== frame.contentWindow || e.origin !== s.origin) return;
      if (e.data && e.data.source === 'paycheckout' && e.data.type === 'payment.resize') {
        var px = e.data.data && e.data.data.height;
        // Fit the content, never below the height option (CSS max() keeps any unit it uses).
        if (typeof px === 'number' && isFinite(px) && px > 0) {
          frame.style.height = 'max(' + height + ', ' + Math.min(Math.ceil(px), MAX_HEIGHT) + 'px)';
        }
        return;
      }
      var data = payload(e.data);
      if (!data) return;
      if (e.data.type === 'payment.ready') {
        if (s.ready) return;
        s.ready = true;
        if (o.onReady) o.onReady(data);
        return;
      }
      finish(s, TYPES[e.data.type][0], data);
    };

    if (s.modal) {
      var dialog = el('div', {
        position: 'relative', display: 'flex', flexDirection: 'column', width: width, maxWidth: '100%',
        maxHeight: '100%', background: '#fff', borderRadius: '12px', overflow: 'auto', outline: 'none',
        boxShadow: '0 12px 48px rgba(0,0,0,.35)'
      });
      dialog.setAttribute('role', 'dialog');
      dialog.setAttribute('aria-modal', 'true');
      dialog.setAttribute('aria-label', 'Checkout');
      dialog.tabIndex = -1;
      var bar = el('div', { display: 'flex', justifyContent: 'flex-end', padding: '4px' });
      var btn = el('button', {
        width: '40px', height: '40px', border: '0', borderRadius: '8px', background: 'transparent',
        font: '24px/1 system-ui,sans-serif', color: '#333', cursor: 'pointer'
      });
      btn.type = 'button';
      btn.textContent = '\u00d7';
      btn.setAttribute('aria-label', 'Close checkout');
      btn.addEventListener('click', function () { finish(s, 'onCancel', {}); });
      bar.appendChild(btn);
      dialog.appendChild(bar);
      dialog.appendChild(frame);
      s.root = el('div', {
        position: 'fixed', top: '0', right: '0', bottom: '0', left: '0', zIndex: '2147483000',
        display: 'flex', alignItems: 'center', justifyContent: 'center', padding: '16px',
        boxSizing: 'border-box', background: 'rgba(17,24,39,.6)'
      });
      s.root.setAttribute('data-paycheckout', 'backdrop');
      s.root.appendChild(dialog);
      s.onKey = function (e) {
        if (cur === s && (e.key === 'Escape' || e.key === 'Esc')) {
          e.preventDefault();
          finish(s, 'onCancel', {});
        }
      };
      s.focus = d.activeElement;
      s.overflow = d.body.style.overflow;
      d.body.style.overflow = 'hidden';
      // Keep keyboard and screen-reader focus inside the dialog.
      var kids = d.body.children;
      for (var j = 0; j < kids.length; j++) {
        if (!kids[j].inert) {
          kids[j].inert = true;
          s.inert.push(kids[j]);
        }
      }
      d.body.appendChild(s.root);
      w.addEventListener('keydown', s.onKey, true);
      dialog.focus();
    } else {
      host.appendChild(frame);
    }
    frame.setAttribute('data-paycheckout', 'frame');
    cur = s;
    w.addEventListener('message', s.onMessage);
  }

  function destroy() {
    close(cur);
  }

  w.PayCheckout = Object.freeze({ init: init, destroy: destroy, version: '1' });
})(window, document);
