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

  const MSG = {
    '009': 'Invalid email format', '025': 'Invalid name', '038': 'Invalid UPI', '040': 'Invalid card number',
    '041': 'Invalid card expiration', '042': 'Invalid card CVV', '045': 'Invalid payment method', '048': 'Invalid token',
    req: 'Enter the wallet token'
  };
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
  const amountText = () => (S ? S.amount + ' ' + S.unit : '');
  const str = (v) => (v == null ? '' : String(v));
  const reqId = (r) => str((r && r.paymentRequestId) || (S && S.requestId) || requestId);
  const payId = (r) => str(r && (r.paymentId != null ? r.paymentId : r.transactionId));
  const say = (t) => { $('status').textContent = t; };

  function show(view) {
    for (const v of ['loading', 'pay', 'wait', 'result']) $(v).hidden = v !== view;
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
    $('result-ref').textContent = ref ? 'Reference: ' + ref : '';
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
    result('bad', 'This checkout link has expired',
      'For your security, checkout links are valid for 15 minutes. Go back to the merchant and start the payment again.');
    $('cancel').hidden = !cancelable;
  }

  function closed(p) {
    done = true;
    const cancelled = (p && p.paymentRequestStatusId === 3) || /cancel/i.test(str(p && (p.detail || p.title)));
    if (cancelled) result('bad', 'Payment request cancelled', 'This payment request was cancelled and can no longer be paid.');
    else result('ok', 'Already paid', 'This payment request has already been paid. There is nothing more to do.');
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
      $('result-msg').textContent = msg + ' Returning you to the merchant…';
      $('back').href = url;
      $('back').hidden = false;
      setTimeout(() => location.assign(url), REDIRECT_MS);
    } else if (retry) {
      offerRetry('Try again', () => {
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
    finish('ok', 'Payment successful', 'You paid ' + amountText() + (S.recipientName ? ' to ' + S.recipientName : '') + '.', r,
      'payment.success', { url: str(S.successUrl), requestId: reqId(r), paymentId: payId(r) }, S.successUrl);
  }

  function failure(r) {
    const log = (r && r.lastLog) || {};
    const reason = log.message || MSG[log.code] || 'Your payment was declined.';
    finish('bad', 'Payment failed', reason + ' No money was taken.', r,
      'payment.failure', { url: str(S.failureUrl), requestId: reqId(r), paymentId: payId(r) }, S.failureUrl, true);
  }

  function pending(r) {
    finish('wait', 'Payment pending',
      'We are still waiting for confirmation. You will be notified when it completes; you do not need to pay again.', r,
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
      wait('Scan to pay', 'Scan this code with your banking app, or copy it into the app. This page updates when the payment is confirmed.', str(na.qrPayload), na.qrImage);
    } else if (na.type === 'upi_collect') {
      wait('Approve in your UPI app', 'We sent a payment request to your UPI app. Approve it there; this page updates automatically.',
        na.reference ? 'Reference: ' + na.reference : '');
    } else if (!polling) {
      wait('Waiting for confirmation…', 'Your bank is confirming the payment. This usually takes a few seconds.');
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
      formErr('Card verification is unavailable right now. Please try again or use another card.');
      return;
    }
    if (u.origin === location.origin) {
      if (!u.searchParams.has('requestId')) u.searchParams.set('requestId', requestId);
      if (embedded && !u.searchParams.has('embedded')) u.searchParams.set('embedded', 'true');
      if (originParam && !u.searchParams.has('origin')) u.searchParams.set('origin', originParam);
    }
    store.set(CTX, JSON.stringify({ embedded, modal, origin: originParam, s: S }));
    cancelable = false;
    wait('Verifying with your bank…', 'You are being taken to your bank to confirm this payment.');
    location.assign(u.href);
  }

  // ---- card fields --------------------------------------------------------------------------------

  const BRANDS = [
    ['American Express', /^3[47]/, [15]],
    ['Visa', /^4/, [13, 16, 19]],
    ['Mastercard', /^(5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720)/, [16]],
    ['Discover', /^(6011|65|64[4-9])/, [16, 19]],
    ['Diners Club', /^3(0[0-5]|[689])/, [14, 16, 19]],
    ['JCB', /^35(2[89]|[3-8])/, [16, 19]],
    ['UnionPay', /^62/, [16, 17, 18, 19]]
  ];
  const digits = (v) => v.replace(/\D/g, '');
  const brandOf = (d) => BRANDS.find((b) => b[1].test(d)) || null;

  function luhn(d) {
    let sum = 0;
    for (let i = 0; i < d.length; i++) {
      let n = +d[d.length - 1 - i];
      if (i % 2) { n *= 2; if (n > 9) n -= 9; }
      sum += n;
    }
    return sum % 10 === 0;
  }

  const CHECKS = {
    holderName: (v) => {
      v = v.trim();
      return v.length >= 2 && v.length <= 100 && /^[\p{L}\p{M}' .,-]+$/u.test(v) ? '' : '025';
    },
    number: (v) => {
      const d = digits(v), b = brandOf(d);
      const lenOk = b ? b[2].includes(d.length) : d.length >= 12 && d.length <= 19;
      return /^[\d ]+$/.test(v.trim()) && lenOk && luhn(d) ? '' : '040';
    },
    expiry: (v) => {
      const m = /^(\d\d)\/(\d\d)$/.exec(v.trim());
      if (!m) return '041';
      const mon = +m[1], yr = 2000 + +m[2], now = new Date(), y = now.getFullYear(), cm = now.getMonth() + 1;
      return mon >= 1 && mon <= 12 && (yr > y || (yr === y && mon >= cm)) && yr <= y + 20 ? '' : '041';
    },
    cvc: (v) => {
      const b = brandOf(digits($('cc-number').value));
      const re = b && b[0] === 'American Express' ? /^\d{4}$/ : b ? /^\d{3}$/ : /^\d{3,4}$/;
      return re.test(v.trim()) ? '' : '042';
    },
    email: (v) => {
      v = v.trim();
      return !v || (v.length <= 100 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v)) ? '' : '009';
    },
    token: (v) => (v.trim() ? '' : 'req'),
    upiId: (v) => (/^[\w.-]{2,256}@[a-zA-Z][a-zA-Z0-9]{1,63}$/.test(v.trim()) ? '' : '038')
  };

  function setErr(input, msg) {
    if (msg) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
    const el = $(input.id + '-e');
    if (el) el.textContent = msg;
  }

  function check(input) {
    const f = CHECKS[input.name];
    const code = f ? f(input.value) : '';
    setErr(input, code ? MSG[code] : '');
    return !code;
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

  function formatExpiry(el, deleting) {
    const raw = el.value;
    let d = digits(raw);
    if (/^\d\D/.test(raw)) d = '0' + d; // "1/" means January
    if (d.length === 6) d = d.slice(0, 2) + d.slice(4); // autofill "MM/YYYY"
    d = d.slice(0, 4);
    if (d.length === 1 && d > '1') d = '0' + d;
    let out = d.length > 2 ? d.slice(0, 2) + '/' + d.slice(2) : d;
    if (d.length === 2 && !deleting && raw.length >= 2) out += '/';
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
      const msg = MSG[x && x.code] || str(x && x.detail) || 'Invalid value';
      if (input instanceof HTMLInputElement) {
        setErr(input, msg);
        if (!first) first = input;
      } else {
        other.push(msg);
      }
    }
    if (other.length || !first) formErr(other.join('. ') || MSG[p.code] || str(p.detail || p.title) || 'Please check your details.');
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
      say(bad === 1 ? 'Please correct the highlighted field.' : 'Please correct ' + bad + ' highlighted fields.');
      first.focus();
      return;
    }
    const fs = form.querySelector('fieldset'), btn = form.querySelector('.pay'), label = btn.textContent;
    busy = true;
    fs.disabled = true;
    $('cancel').disabled = true;
    btn.textContent = 'Processing…';
    say('Processing payment…');
    const r = await api('/checkout/api/pay/' + form.id, collect(form));
    busy = false;
    fs.disabled = false;
    $('cancel').disabled = false;
    btn.textContent = label;
    say('');
    if (r.status === 200 && r.data) return outcome(r.data, false);
    if (r.status === 401) return expired();
    if (r.status === 409) return closed(r.data);
    if (r.status === 400 && r.data) return fieldErrors(form, r.data);
    if (r.status === 429) formErr('Too many attempts. Please wait a moment and try again.');
    else if (r.status === 0) formErr('We could not reach the payment service. Check your connection and try again.');
    else formErr(str(r.data && r.data.detail) || 'Something went wrong on our side. Please try again.');
    btn.focus();
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
        result('wait', 'Payment cancelled', 'No payment was made.');
      } else if (S && httpUrl(S.failureUrl)) {
        location.assign(httpUrl(S.failureUrl));
      }
    });
    $('retry').addEventListener('click', () => { if (retryFn) retryFn(); });
  }

  // ---- start --------------------------------------------------------------------------------------

  function render() {
    $('recipient').textContent = S.recipientName ? 'Payment to ' + S.recipientName : '';
    $('recipient').hidden = !S.recipientName;
    $('amount').textContent = amountText();
    $('amount').hidden = false;
    $('sandbox').hidden = S.sandbox !== true;
    for (const b of document.querySelectorAll('#card .pay, #wallet .pay, #upi .pay')) b.textContent = 'Pay ' + amountText();
    if (!embedded) $('cancel').textContent = 'Cancel and return to the merchant';
    cancelable = embedded || !!httpUrl(S.failureUrl);
  }

  async function boot() {
    wire();
    if (refused) {
      done = true;
      return result('bad', 'This checkout link is invalid',
        'This link does not carry a checkout session. Go back to the merchant and start the payment again.');
    }
    if (!requestId || !token) return expired();
    const r = await api('/checkout/api/session?origin=' + encodeURIComponent(originParam));
    if (r.status === 200 && r.data && str(r.data.requestId) !== requestId) {
      // The token names another payment request than the address: show neither.
      done = true;
      return result('bad', 'This checkout link is invalid', 'Go back to the merchant and start the payment again.');
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
      result('bad', 'We could not load the checkout', 'Please check your connection and try again.');
      return offerRetry('Reload', () => location.reload());
    }
    render();
    if (embedded && !S.parentOrigin) {
      done = true;
      cancelable = false;
      return result('bad', 'This checkout cannot be shown here',
        'The site that opened this checkout is not registered for payments, so the result could not be reported. Please contact the merchant.');
    }
    if (resume) {
      wait('Confirming your payment…', 'Checking the result of your bank verification.');
      return startPoll(0);
    }
    if (S.paymentRequestStatusId === 1 || S.paymentRequestStatusId === 3) return closed(S);
    methods = METHODS.filter((m) => (S.methods || []).includes(m));
    if (!methods.length) {
      done = true;
      return result('bad', 'No payment method available', 'This payment cannot be completed online. Please contact the merchant.');
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
    post('payment.ready', {});
  }

  if (embedded) {
    // The page's own height, not the frame's, decides (no full-viewport card).
    document.documentElement.classList.add('embedded');
    if (window.ResizeObserver) new ResizeObserver(reportHeight).observe(document.documentElement);
  }
  boot().finally(reportHeight);
})();
