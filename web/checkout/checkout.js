/* Hosted checkout page. Served under a strict CSP: no inline code, no inline styles, no eval. */
(() => {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const q = new URLSearchParams(location.search);
  const requestId = q.get('requestId') || '';
  const resume = q.get('resume') === '1';
  const KEY = 'paycheckout.token.' + requestId;
  const CTX = 'paycheckout.ctx.' + requestId;
  const store = {
    get(k) { try { return sessionStorage.getItem(k); } catch (e) { return null; } },
    set(k, v) { try { sessionStorage.setItem(k, v); } catch (e) { /* storage blocked: keep it in memory */ } }
  };

  // A merchant API key (prk_test_... / prk_live_...) is never a checkout credential: a page address
  // carrying one is refused, and the key is neither stored nor sent anywhere.
  const API_KEY = /prk_(test|live)_/i;
  const tokenLike = (t) => typeof t === 'string' && t !== '' && t.length <= 1024 && !API_KEY.test(t);

  // The token arrives once in the URL; keep it in session storage and take it out of the address bar.
  let token = q.get('token');
  let refused = false;
  if (token !== null) {
    q.delete('token');
    const qs = q.toString();
    history.replaceState(history.state, '', location.pathname + (qs ? '?' + qs : '') + location.hash);
    if (tokenLike(token)) {
      store.set(KEY, token);
    } else {
      token = null;
      refused = true;
    }
  } else {
    token = store.get(KEY);
    if (!tokenLike(token)) token = null;
  }
  for (const v of q.values()) if (API_KEY.test(v)) refused = true;

  // What we knew before a 3-D Secure round trip (parent origin, return URLs).
  let saved = null;
  if (resume) {
    try { saved = JSON.parse(store.get(CTX) || 'null'); } catch (e) { saved = null; }
  }
  const embedded = q.has('embedded') ? q.get('embedded') === 'true' : !!(saved && saved.embedded);
  const modal = q.has('modal') ? q.get('modal') === 'true' : !!(saved && saved.modal);
  const originParam = q.get('origin') || (saved && saved.origin) || '';

  // The page's language is the server's choice (Accept-Language, or PayCheckout's `locale`): it
  // rendered the static text and put this script's messages in <html data-msg>.
  const LANG = document.documentElement.lang || 'en';
  const M = (() => {
    try { return JSON.parse(document.documentElement.getAttribute('data-msg') || '{}'); } catch (e) { return {}; }
  })();
  const t = (key, vars) => String(M[key] || key).replace(/\{(\w+)\}/g, (m, n) => (vars && vars[n] != null ? String(vars[n]) : m));
  // Numbers and amounts follow the shopper's region when it speaks the page's language (de-CH
  // groups differently from de-DE), else the page language.
  const LOCALE = (() => {
    for (const l of [q.get('locale'), ...(navigator.languages || [])]) {
      if (!l || l.split('-')[0].toLowerCase() !== LANG) continue;
      try { if (Intl.NumberFormat.supportedLocalesOf([l]).length) return l; } catch (e) { /* not a locale */ }
    }
    return LANG;
  })();
  // Field error codes of the API (and of the checks below) -> message keys.
  const MSG = {
    '009': 'err.email', '025': 'err.name.invalid', '038': 'err.upi', '040': 'err.number.invalid',
    '041': 'err.expiry.format', '042': 'err.cvc.3', '045': 'err.method', '048': 'err.session'
  };
  // Decline codes the page explains in the shopper's language.
  const DECLINES = ['001', '002', '004', '005', '006', '013', '999'];
  const METHODS = ['card', 'wallet', 'upi', 'qr'];
  const POLL_MS = 1500, POLL_MAX_MS = 120000, REDIRECT_MS = 3000;

  let S = null; // session
  let methods = [];
  let method = 'card';
  let busy = false, done = false, cancelable = false;
  let pollTimer = 0, pollStart = 0;
  let retryFn = null;

  // ---- helpers ----------------------------------------------------------------------------------

  async function api(path, body) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 30000);
    const headers = { 'X-Checkout-Token': token || '', Accept: 'application/json, application/problem+json' };
    if (body) headers['Content-Type'] = 'application/json';
    try {
      const res = await fetch(path, {
        method: body ? 'POST' : 'GET', headers, body: body ? JSON.stringify(body) : undefined,
        cache: 'no-store', credentials: 'same-origin', signal: ctl.signal
      });
      let data = null;
      try { data = await res.json(); } catch (e) { data = null; }
      return { status: res.status, data };
    } catch (e) {
      return { status: 0, data: null };
    } finally {
      clearTimeout(timer);
    }
  }

  const httpUrl = (u) => {
    try { return /^https?:$/.test(new URL(u, location.href).protocol) ? u : ''; } catch (e) { return ''; }
  };
  // The amount stays the API's decimal string: Intl formats the string itself (exact decimal), with
  // as many fraction digits as the API sent, so no float arithmetic touches it.
  function money(amount, unit) {
    const s = str(amount), m = /^-?\d+(?:\.(\d+))?$/.exec(s);
    if (!m) return s + ' ' + unit;
    const digits = { minimumFractionDigits: m[1] ? m[1].length : 0, maximumFractionDigits: m[1] ? m[1].length : 0 };
    try {
      return new Intl.NumberFormat(LOCALE, Object.assign({ style: 'currency', currency: unit }, digits)).format(s);
    } catch (e) { /* not an ISO 4217 code (e.g. a crypto unit): number, then the unit */ }
    try { return new Intl.NumberFormat(LOCALE, digits).format(s) + ' ' + unit; } catch (e) { return s + ' ' + unit; }
  }
  const amountText = () => (S ? money(S.amount, S.unit) : '');
  // Joins two sentences, adding the full stop the first one may lack ("… the card issuer" + "No money…").
  const sentences = (a, b) => (a ? a + (/[.!?…।]$/.test(a) ? ' ' : '. ') + b : b);
  const str = (v) => (v == null ? '' : String(v));
  const reqId = (r) => str((r && r.paymentRequestId) || (S && S.requestId) || requestId);
  const payId = (r) => str(r && (r.paymentId != null ? r.paymentId : r.transactionId));
  const say = (t) => { $('status').textContent = t; };

  function show(view) {
    for (const v of ['loading', 'pay', 'wait', 'result']) $(v).hidden = v !== view;
    $('foot').hidden = false;
    $('cancel').hidden = !(cancelable && (view === 'pay' || view === 'wait'));
  }

  // Reports to the parent window, only to the origin the server confirmed. Never "*".
  function post(type, data) {
    if (!embedded || !S || !S.parentOrigin || window.parent === window) return false;
    window.parent.postMessage({ source: 'paycheckout', type, data }, S.parentOrigin);
    return true;
  }

  // Embedded: reports the content height (to the confirmed origin only, like
  // every event) so PayCheckout fits the iframe to the page and the Pay
  // button is never cut off.
  let reportedHeight = 0;
  function reportHeight() {
    const h = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (h > 0 && h !== reportedHeight && post('payment.resize', { height: h })) reportedHeight = h;
  }

  function result(kind, title, msg, r) {
    clearTimeout(pollTimer);
    pollTimer = 0;
    $('result-icon').className = 'icon ' + kind;
    $('result-title').textContent = title;
    $('result-msg').textContent = msg;
    const ref = r && r.transactionNumber;
    $('result-ref').textContent = ref ? t('reference', { ref }) : '';
    $('result-ref').hidden = !ref;
    $('retry').hidden = true;
    $('back').hidden = true;
    show('result');
    $('result-title').focus();
  }

  function wait(title, msg, code, qrImage) {
    const fresh = $('wait').hidden;
    $('wait-title').textContent = title;
    $('wait-msg').textContent = msg;
    $('wait-code').textContent = code || '';
    $('wait-code').hidden = !code;
    // Only the PNG data: URL the server rendered (the CSP allows data: images for it).
    const img = typeof qrImage === 'string' && qrImage.indexOf('data:image/png;base64,') === 0 ? qrImage : '';
    if (img) $('wait-qr').src = img; else $('wait-qr').removeAttribute('src');
    $('wait-qr').hidden = !img;
    $('wait').classList.toggle('has-qr', !!img);
    show('wait');
    if (fresh) $('wait-title').focus();
  }

  function offerRetry(label, fn) {
    retryFn = fn;
    $('retry').textContent = label;
    $('retry').hidden = false;
  }

  function expired() {
    done = true;
    cancelable = cancelable && embedded;
    result('bad', t('expired.title'), t('expired.msg'));
    $('cancel').hidden = !cancelable;
  }

  function closed(p) {
    done = true;
    const cancelled = (p && p.paymentRequestStatusId === 3) || /cancel/i.test(str(p && (p.detail || p.title)));
    if (cancelled) result('bad', t('cancelled.title'), t('cancelled.msg'));
    else result('ok', t('paid.title'), t('paid.msg'));
    $('cancel').hidden = !(cancelable && embedded);
  }

  function formErr(msg) {
    const el = $('formerr');
    el.textContent = '';
    el.textContent = msg;
  }

  // ---- terminal results ---------------------------------------------------------------------------

  function finish(kind, title, msg, r, type, data, url, retry) {
    if (done) return;
    done = true;
    cancelable = false;
    result(kind, title, msg, r);
    if (embedded) {
      post(type, data);
      return;
    }
    url = httpUrl(url);
    if (url) {
      $('result-msg').textContent = msg + ' ' + t('returning');
      $('back').href = url;
      $('back').hidden = false;
      setTimeout(() => location.assign(url), REDIRECT_MS);
    } else if (retry) {
      offerRetry(t('retry'), () => {
        done = false;
        cancelable = !!httpUrl(S.failureUrl);
        $('cc-csc').value = '';
        show('pay');
        const first = $(method).querySelector('input');
        if (first) first.focus();
      });
    }
  }

  function success(r) {
    const msg = S.recipientName ? t('success.msgTo', { amount: amountText(), name: S.recipientName }) : t('success.msg', { amount: amountText() });
    finish('ok', t('success.title'), msg, r,
      'payment.success', { url: str(S.successUrl), requestId: reqId(r), paymentId: payId(r) }, S.successUrl);
  }

  function failure(r) {
    const log = (r && r.lastLog) || {};
    // English shows the provider's own reason; other languages the translation of its code.
    const code = str(log.code);
    let reason = LANG === 'en' ? str(log.message).trim() : '';
    if (!reason) reason = DECLINES.includes(code) ? t('decline.' + code) : t('failure.declined');
    finish('bad', t('failure.title'), sentences(reason, t('failure.noMoney')), r,
      'payment.failure', { url: str(S.failureUrl), requestId: reqId(r), paymentId: payId(r) }, S.failureUrl, true);
  }

  function pending(r) {
    finish('wait', t('pending.title'), t('pending.msg'), r,
      'payment.pending', { url: str(S.successUrl), requestId: reqId(r) }, S.successUrl);
  }

  // ---- payment outcome and polling --------------------------------------------------------------

  function outcome(r, polling) {
    const log = r.lastLog || {};
    const ts = Number(r.transactionStatusId != null ? r.transactionStatusId : log.transactionStatusId);
    if (ts === 1 || (r.paymentRequestStatusId === 1 && ts !== 2)) return success(r);
    if (ts === 2) return failure(r);
    const na = r.nextAction || {};
    if (na.type === 'threeds_redirect' && !polling) return threeds(na.url);
    if (na.type === 'qr') {
      wait(t('qrWait.title'), t('qrWait.msg'), str(na.qrPayload), na.qrImage);
    } else if (na.type === 'upi_collect') {
      wait(t('upiWait.title'), t('upiWait.msg'), na.reference ? t('reference', { ref: na.reference }) : '');
    } else if (!polling) {
      wait(t('bankWait.title'), t('bankWait.msg'));
    }
    if (!polling) startPoll(POLL_MS);
  }

  function startPoll(delay) {
    clearTimeout(pollTimer);
    pollStart = Date.now();
    pollTimer = setTimeout(poll, delay);
  }

  async function poll() {
    pollTimer = 0;
    if (done) return;
    const r = await api('/checkout/api/status');
    if (done) return;
    if (r.status === 401) return expired();
    if (r.status === 200 && r.data) {
      outcome(r.data, true);
      if (done) return;
    }
    if (Date.now() - pollStart >= POLL_MAX_MS) return pending(r.status === 200 ? r.data : null);
    pollTimer = setTimeout(poll, POLL_MS);
  }

  // 3-D Secure: navigate this frame only, never the top window.
  function threeds(url) {
    let u = null;
    try { u = new URL(url, location.href); } catch (e) { u = null; }
    if (!u || (u.origin !== location.origin && u.protocol !== 'https:')) {
      show('pay');
      formErr(t('threeds.unavailable'));
      return;
    }
    if (u.origin === location.origin) {
      if (!u.searchParams.has('requestId')) u.searchParams.set('requestId', requestId);
      if (embedded && !u.searchParams.has('embedded')) u.searchParams.set('embedded', 'true');
      if (originParam && !u.searchParams.has('origin')) u.searchParams.set('origin', originParam);
      if (q.get('locale') && !u.searchParams.has('locale')) u.searchParams.set('locale', q.get('locale'));
    }
    store.set(CTX, JSON.stringify({ embedded, modal, origin: originParam, s: S }));
    cancelable = false;
    wait(t('threeds.title'), t('threeds.msg'));
    location.assign(u.href);
  }

  // ---- card fields --------------------------------------------------------------------------------

  // BEGIN card brands: generated from internal/card/brand.go by `go generate ./web`; do not edit.
  const IIN = [
    [2, 34, 34, 'amex'],
    [2, 37, 37, 'amex'],
    [3, 300, 305, 'diners'],
    [4, 3095, 3095, 'diners'],
    [2, 36, 36, 'diners'],
    [2, 38, 39, 'diners'],
    [4, 3528, 3589, 'jcb'],
    [1, 4, 4, 'visa'],
    [2, 51, 55, 'mastercard'],
    [4, 2221, 2720, 'mastercard'],
    [4, 6011, 6011, 'discover'],
    [6, 622126, 622925, 'discover'],
    [3, 644, 649, 'discover'],
    [2, 65, 65, 'discover'],
    [2, 62, 62, 'unionpay'],
    [2, 50, 50, 'maestro'],
    [2, 56, 58, 'maestro'],
    [4, 6304, 6304, 'maestro'],
    [3, 639, 639, 'maestro'],
    [2, 67, 67, 'maestro']
  ];
  const BRAND_NAMES = {
    amex: ['American Express', [15]],
    diners: ['Diners Club', [14, 16, 19]],
    discover: ['Discover', [16, 19]],
    jcb: ['JCB', [16, 19]],
    maestro: ['Maestro', [12, 13, 14, 15, 16, 17, 18, 19]],
    mastercard: ['Mastercard', [16]],
    unionpay: ['UnionPay', [16, 17, 18, 19]],
    visa: ['Visa', [13, 16, 19]]
  };
  const iinBrand = (d) => {
    for (const [w, lo, hi, id] of IIN) {
      if (d.length >= w) { const p = +d.slice(0, w); if (p >= lo && p <= hi) return id; }
    }
    return null;
  };
  // END card brands
  const digits = (v) => v.replace(/\D/g, '');
  // [display name, expected lengths] of the brand the number starts with, or null.
  const brandOf = (d) => { const id = iinBrand(d); return id ? BRAND_NAMES[id] : null; };

  function luhn(d) {
    let sum = 0;
    for (let i = 0; i < d.length; i++) {
      let n = +d[d.length - 1 - i];
      if (i % 2) { n *= 2; if (n > 9) n -= 9; }
      sum += n;
    }
    return sum % 10 === 0;
  }

  // Each check returns '' or the key of a message that says what to do.
  const CHECKS = {
    holderName: (v) => {
      v = v.trim();
      if (!v) return 'err.name.empty';
      return v.length >= 2 && v.length <= 100 && /^[\p{L}\p{M}' .,-]+$/u.test(v) ? '' : 'err.name.invalid';
    },
    number: (v) => {
      const d = digits(v), b = brandOf(d);
      if (!d) return 'err.number.empty';
      if (!/^[\d ]+$/.test(v.trim())) return 'err.number.invalid';
      const lens = b ? b[1] : [12, 19];
      if (d.length < Math.min(...lens)) return 'err.number.short';
      const lenOk = b ? lens.includes(d.length) : d.length >= 12 && d.length <= 19;
      return lenOk && luhn(d) ? '' : 'err.number.invalid';
    },
    expiry: (v) => {
      v = v.trim();
      if (!v) return 'err.expiry.empty';
      const m = /^(\d\d)\/(\d\d)$/.exec(v);
      if (!m) return 'err.expiry.format';
      const mon = +m[1], yr = 2000 + +m[2], now = new Date(), y = now.getFullYear(), cm = now.getMonth() + 1;
      if (mon < 1 || mon > 12) return 'err.expiry.month';
      if (yr < y || (yr === y && mon < cm)) return 'err.expiry.past';
      return yr <= y + 20 ? '' : 'err.expiry.far';
    },
    cvc: (v) => {
      v = v.trim();
      if (!v) return 'err.cvc.empty';
      const b = brandOf(digits($('cc-number').value));
      const amex = b && b[0] === 'American Express';
      const re = amex ? /^\d{4}$/ : b ? /^\d{3}$/ : /^\d{3,4}$/;
      return re.test(v) ? '' : amex ? 'err.cvc.4' : 'err.cvc.3';
    },
    email: (v) => {
      v = v.trim();
      return !v || (v.length <= 100 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v)) ? '' : 'err.email';
    },
    upiId: (v) => (/^[\w.-]{2,256}@[a-zA-Z][a-zA-Z0-9]{1,63}$/.test(v.trim()) ? '' : 'err.upi')
  };

  function setErr(input, msg) {
    if (msg) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
    const el = $(input.id + '-e');
    if (el) el.textContent = msg;
  }

  function check(input) {
    const f = CHECKS[input.name];
    const key = f ? f(input.value) : '';
    setErr(input, key ? t(key) : '');
    return !key;
  }

  function formatNumber(el) {
    const caret = el.selectionStart == null ? el.value.length : el.selectionStart;
    const before = digits(el.value.slice(0, caret)).length;
    const d = digits(el.value).slice(0, 19);
    const b = brandOf(d);
    const gaps = b && b[0] === 'American Express' ? [4, 10] : [4, 8, 12, 16];
    let out = '';
    for (let i = 0; i < d.length; i++) out += (gaps.includes(i) ? ' ' : '') + d[i];
    $('cc-brand').textContent = b ? b[0] : '';
    if (out === el.value) return;
    el.value = out;
    if (document.activeElement === el) {
      let p = 0;
      for (let n = 0; p < out.length && n < before; p++) if (out[p] !== ' ') n++;
      el.setSelectionRange(p, p);
    }
  }

  // MM/YY as the shopper types: the slash comes once the month is certain. "1" may still become
  // 10, 11 or 12, so it stays "1"; "13" cannot be a month, so it is January and a year digit
  // ("01/3"); "3" can only be March ("03/"); "00" is no month, so the second 0 is dropped.
  function formatExpiry(el, deleting) {
    const raw = el.value;
    let d = digits(raw);
    if (/^\d\D/.test(raw)) d = '0' + d; // "1/" means January
    if (d.length === 6) d = d.slice(0, 2) + d.slice(4); // autofill "MM/YYYY"
    if (d[0] > '1') d = '0' + d;
    else if (d[0] === '1' && d[1] > '2') d = '0' + d;
    else if (d.startsWith('00')) d = '0' + d.slice(2);
    d = d.slice(0, 4);
    let out = d.length > 2 ? d.slice(0, 2) + '/' + d.slice(2) : d;
    if (d.length === 2 && !deleting) out += '/';
    if (out !== raw) el.value = out;
  }

  // ---- submit -------------------------------------------------------------------------------------

  function collect(form) {
    const body = {};
    for (const i of form.querySelectorAll('input')) {
      let v = i.value.trim();
      if (i.name === 'number' || i.name === 'cvc') v = digits(v);
      if (i.name === 'email' && !v) continue;
      body[i.name] = v;
    }
    return body;
  }

  function fieldErrors(form, p) {
    const errs = Array.isArray(p.errors) ? p.errors : [];
    const other = [];
    let first = null;
    for (const x of errs) {
      const name = str(x && x.field).split(/[./]/).pop();
      const input = name ? form.elements.namedItem(name) : null;
      const key = MSG[x && x.code];
      const msg = key ? t(key) : (LANG === 'en' && str(x && x.detail)) || t('err.value');
      if (input instanceof HTMLInputElement) {
        setErr(input, msg);
        if (!first) first = input;
      } else {
        other.push(msg);
      }
    }
    if (other.length || !first) {
      formErr(other.join(' ') || (MSG[p.code] && t(MSG[p.code])) || (LANG === 'en' && str(p.detail || p.title)) || t('checkDetails'));
    }
    if (first) first.focus();
  }

  async function submit(e) {
    e.preventDefault();
    const form = e.currentTarget;
    if (busy || done) return;
    formErr('');
    let first = null, bad = 0;
    for (const i of form.querySelectorAll('input')) {
      if (!check(i)) { bad++; if (!first) first = i; }
    }
    if (first) {
      say(bad === 1 ? t('fixOne') : t('fixMany', { n: bad }));
      first.focus();
      return;
    }
    return attempt(form, collect(form));
  }

  // attempt posts one payment of the form's method and shows its outcome; it resolves to true when
  // the API took the attempt (whatever its result), false when the form stays open with an error.
  async function attempt(form, body) {
    const fs = form.querySelector('fieldset'), btn = form.querySelector('.pay'), label = btn ? btn.textContent : '';
    busy = true;
    fs.disabled = true;
    $('cancel').disabled = true;
    if (btn) btn.textContent = t('processing');
    say(t('processingPayment'));
    const r = await api('/checkout/api/pay/' + form.id, body);
    busy = false;
    fs.disabled = false;
    $('cancel').disabled = false;
    if (btn) btn.textContent = label;
    say('');
    if (r.status === 200 && r.data) { outcome(r.data, false); return true; }
    if (r.status === 401) { expired(); return false; }
    if (r.status === 409) { closed(r.data); return false; }
    if (r.status === 400 && r.data) { fieldErrors(form, r.data); return false; }
    if (r.status === 429) formErr(t('tooMany'));
    else if (r.status === 0) formErr(t('network'));
    else formErr((LANG === 'en' && str(r.data && r.data.detail)) || t('serverError'));
    if (btn) btn.focus();
    return false;
  }

  // ---- wallets ------------------------------------------------------------------------------------

  // The wallets' own buttons; the shopper never sees or types a token: the wallet hands it to this
  // page, which passes it to the API as {"token": ...} like a merchant's server would.
  const GPAY_JS = 'https://pay.google.com/gp/p/js/pay.js';
  const GPAY_NETWORKS = ['AMEX', 'DISCOVER', 'JCB', 'MASTERCARD', 'VISA'];
  let walletsShown = 0;

  function gpayCard(cfg) {
    return {
      type: 'CARD',
      parameters: { allowedAuthMethods: ['PAN_ONLY', 'CRYPTOGRAM_3DS'], allowedCardNetworks: GPAY_NETWORKS },
      tokenizationSpecification: { type: 'PAYMENT_GATEWAY', parameters: cfg.tokenizationParameters || {} }
    };
  }

  function walletShown(n) {
    walletsShown += n;
    $('wallet-none').hidden = walletsShown > 0;
    reportHeight();
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const el = document.createElement('script');
      el.src = src;
      el.async = true;
      el.onload = resolve;
      el.onerror = reject;
      document.head.appendChild(el);
    });
  }

  async function googlePay(cfg) {
    try {
      await loadScript(GPAY_JS);
      const client = new window.google.payments.api.PaymentsClient({ environment: cfg.environment === 'PRODUCTION' ? 'PRODUCTION' : 'TEST' });
      const base = { apiVersion: 2, apiVersionMinor: 0 };
      const ready = await client.isReadyToPay(Object.assign({ allowedPaymentMethods: [gpayCard(cfg)] }, base));
      if (!ready || !ready.result) return walletShown(0);
      const request = Object.assign({
        allowedPaymentMethods: [gpayCard(cfg)],
        merchantInfo: Object.assign({ merchantName: str(cfg.merchantName) }, cfg.merchantId ? { merchantId: str(cfg.merchantId) } : {}),
        // The API's decimal string as is: Google Pay takes the total as a string too.
        transactionInfo: { totalPriceStatus: 'FINAL', totalPrice: str(S.amount), currencyCode: str(S.unit) }
      }, base);
      const button = client.createButton({
        buttonType: 'pay', buttonSizeMode: 'fill', buttonLocale: LANG,
        onClick: () => {
          if (busy || done) return;
          formErr('');
          client.loadPaymentData(request).then((data) => {
            let tok = data && data.paymentMethodData && data.paymentMethodData.tokenizationData && data.paymentMethodData.tokenizationData.token;
            // The stripe gateway's token is a Stripe Token object as JSON; the API takes its id (tok_…).
            if (typeof tok === 'string' && (cfg.tokenizationParameters || {}).gateway === 'stripe') {
              try { tok = str(JSON.parse(tok).id); } catch (e) { tok = ''; }
            }
            if (typeof tok !== 'string' || !tok) return formErr(t('wallet.failed'));
            return attempt($('wallet'), { token: tok });
          }, (err) => {
            // A closed sheet is no failure: the shopper is back on the page, free to pay another way.
            if (!(err && err.statusCode === 'CANCELED')) formErr(t('wallet.failed'));
          });
        }
      });
      $('gpay').appendChild(button);
      walletShown(1);
    } catch (e) {
      walletShown(0); // pay.js unreachable or refused: no Google Pay button
    }
  }

  // Apple Pay through Stripe.js's payment request, where the browser offers Apple Pay: Stripe
  // validates the merchant with Apple (for domains registered with Stripe) and hands the page a
  // card PaymentMethod (pm_…), which the API charges like any wallet token.
  const STRIPE_JS = 'https://js.stripe.com/v3/';
  async function applePay(cfg) {
    try {
      if (!window.ApplePaySession) return walletShown(0);
      await loadScript(STRIPE_JS);
      const pr = window.Stripe(str(cfg.publishableKey)).paymentRequest({
        country: str(cfg.country), currency: str(cfg.currency),
        total: { label: str(cfg.label) || t('title'), amount: cfg.amount },
        disableWallets: ['googlePay', 'browserCard', 'link']
      });
      const can = await pr.canMakePayment();
      if (!can || !can.applePay) return walletShown(0);
      pr.on('paymentmethod', async (ev) => {
        const id = str(ev.paymentMethod && ev.paymentMethod.id);
        const ok = id ? await attempt($('wallet'), { token: id }) : (formErr(t('wallet.failed')), false);
        ev.complete(ok ? 'success' : 'fail');
      });
      // A closed sheet ('cancel') is no failure: the shopper stays, free to pay another way.
      $('applepay').hidden = false;
      $('applepay').addEventListener('click', () => {
        if (busy || done) return;
        formErr('');
        pr.show();
      });
      walletShown(1);
    } catch (e) {
      walletShown(0); // Stripe.js unreachable or refused: no Apple Pay button
    }
  }

  function wallets() {
    const w = S.wallets;
    if (!w || (!w.applePay && !w.googlePay)) return walletShown(0);
    // "No wallet" is said once every wallet has answered (both asynchronously).
    if (w.applePay) applePay(w.applePay);
    if (w.googlePay) googlePay(w.googlePay);
  }

  // ---- tabs ---------------------------------------------------------------------------------------

  function select(m, focus) {
    method = m;
    for (const x of methods) {
      const tab = $('tab-' + x), on = x === m;
      tab.setAttribute('aria-selected', on ? 'true' : 'false');
      tab.tabIndex = on ? 0 : -1;
      $(x).hidden = !on;
    }
    formErr('');
    if (focus) $('tab-' + m).focus();
  }

  function wire() {
    for (const m of METHODS) $(m).addEventListener('submit', submit);
    const num = $('cc-number'), exp = $('cc-exp');
    num.addEventListener('input', () => formatNumber(num));
    exp.addEventListener('input', (e) => formatExpiry(exp, /^delete/.test(e.inputType || '')));
    for (const i of document.querySelectorAll('#pay input')) {
      i.addEventListener('blur', () => { if (i.value || i.getAttribute('aria-invalid')) check(i); });
      i.addEventListener('input', () => { if (i.getAttribute('aria-invalid')) check(i); });
    }
    $('tabs').addEventListener('click', (e) => {
      const t = e.target.closest('[role=tab]');
      if (t) select(t.dataset.m, false);
    });
    $('tabs').addEventListener('keydown', (e) => {
      const i = methods.indexOf(method), n = methods.length;
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1 + n, Home: 0, End: n - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      select(methods[to % n], true);
    });
    $('sandbox').addEventListener('click', (e) => {
      const b = e.target.closest('button.fill');
      if (!b || busy || done || $('pay').hidden) return;
      const m = b.dataset.card ? 'card' : 'upi';
      if (!methods.includes(m)) return;
      select(m, false);
      const input = m === 'card' ? num : $('upi-id');
      input.value = b.dataset.card || b.dataset.upi;
      if (m === 'card') formatNumber(num);
      check(input);
      const next = m === 'card' ? [...$('card').querySelectorAll('input[required]')].find((x) => !x.value) : null;
      (next || input).focus();
    });
    // In a PayCheckout modal, Esc inside the checkout closes it like the
    // merchant page's Esc would (keys typed here never reach that page).
    document.addEventListener('keydown', (e) => {
      if (modal && embedded && (e.key === 'Escape' || e.key === 'Esc') && cancelable && !done) $('cancel').click();
    });
    $('cancel').addEventListener('click', () => {
      if (busy) return;
      if (embedded) {
        done = true;
        cancelable = false;
        clearTimeout(pollTimer);
        post('payment.cancel', {});
        result('wait', t('userCancelled.title'), t('userCancelled.msg'));
      } else if (S && httpUrl(S.failureUrl)) {
        location.assign(httpUrl(S.failureUrl));
      }
    });
    $('retry').addEventListener('click', () => { if (retryFn) retryFn(); });
  }

  // ---- start --------------------------------------------------------------------------------------

  function render() {
    $('recipient').textContent = S.recipientName ? t('payTo', { name: S.recipientName }) : '';
    $('recipient').hidden = !S.recipientName;
    $('amount').textContent = amountText();
    $('amount').hidden = false;
    $('sandbox').hidden = S.sandbox !== true;
    for (const b of document.querySelectorAll('#card .pay, #wallet .pay, #upi .pay')) b.textContent = t('payAmount', { amount: amountText() });
    if (!embedded) $('cancel').textContent = t('cancelReturn');
    cancelable = embedded || !!httpUrl(S.failureUrl);
  }

  async function boot() {
    wire();
    if (refused) {
      done = true;
      return result('bad', t('invalidLink.title'), t('invalidLink.msg'));
    }
    if (!requestId || !token) return expired();
    const r = await api('/checkout/api/session?origin=' + encodeURIComponent(originParam));
    if (r.status === 200 && r.data && str(r.data.requestId) !== requestId) {
      // The token names another payment request than the address: show neither.
      done = true;
      return result('bad', t('invalidLink.title'), t('otherRequest.msg'));
    }
    if (r.status === 200 && r.data) {
      S = r.data;
    } else if (r.status === 409 && resume && saved && saved.s) {
      S = saved.s; // paid while we were at the bank: report it from what we knew before
    } else if (r.status === 401) {
      return expired();
    } else if (r.status === 409) {
      return closed(r.data);
    } else {
      result('bad', t('loadFailed.title'), t('loadFailed.msg'));
      return offerRetry(t('reload'), () => location.reload());
    }
    render();
    if (embedded && !S.parentOrigin) {
      done = true;
      cancelable = false;
      return result('bad', t('notHere.title'), t('notHere.msg'));
    }
    if (resume) {
      wait(t('resume.title'), t('resume.msg'));
      return startPoll(0);
    }
    if (S.paymentRequestStatusId === 1 || S.paymentRequestStatusId === 3) return closed(S);
    methods = METHODS.filter((m) => (S.methods || []).includes(m));
    if (!methods.length) {
      done = true;
      return result('bad', t('noMethod.title'), t('noMethod.msg'));
    }
    for (const m of methods) $('tab-' + m).hidden = false;
    if (methods.length > 1) {
      $('tabs').hidden = false;
    } else {
      $(methods[0]).removeAttribute('role');
      $(methods[0]).removeAttribute('aria-labelledby');
    }
    select(methods[0], false);
    show('pay');
    if (methods.includes('wallet')) wallets();
    post('payment.ready', {});
  }

  if (embedded) {
    // The page's own height, not the frame's, decides (no full-viewport card).
    document.documentElement.classList.add('embedded');
    if (window.ResizeObserver) new ResizeObserver(reportHeight).observe(document.documentElement);
  }
  boot().finally(reportHeight);
})();
