/* Sandbox 3-D Secure (ACS) page. Served under a strict CSP: no inline code or styles. */
(() => {
  'use strict';
  const $ = (id) => document.getElementById(id);
  const q = new URLSearchParams(location.search);
  const transactionId = q.get('transactionId') || '';
  const requestId = q.get('requestId') || '';
  let token = null;
  try { token = sessionStorage.getItem('paycheckout.token.' + requestId); } catch (e) { token = null; }

  if (transactionId) {
    $('txn').textContent = 'Transaction ' + transactionId;
    $('txn').hidden = false;
  }

  function back() {
    const p = new URLSearchParams();
    p.set('requestId', requestId);
    for (const k of ['embedded', 'origin', 'frame', 'locale']) if (q.has(k)) p.set(k, q.get(k));
    p.set('resume', '1');
    location.replace('/checkout?' + p);
  }

  function fail(msg) {
    $('err').textContent = msg;
    $('status').textContent = '';
    for (const b of document.querySelectorAll('.actions button')) b.disabled = false;
  }

  async function send(result) {
    for (const b of document.querySelectorAll('.actions button')) b.disabled = true;
    $('err').textContent = '';
    $('status').textContent = 'Sending your answer to the bank…';
    let res;
    try {
      res = await fetch('/checkout/api/3ds/complete', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, application/problem+json', 'X-Checkout-Token': token || '' },
        body: JSON.stringify({ transactionId, result }),
        cache: 'no-store',
        credentials: 'same-origin'
      });
    } catch (e) {
      return fail('We could not reach the bank. Check your connection and try again.');
    }
    if (res.ok || res.status === 409) return back(); // 409: already answered; the checkout shows the result
    if (res.status === 401) return fail('This checkout link has expired. Go back to the merchant and start the payment again.');
    let p = null;
    try { p = await res.json(); } catch (e) { p = null; }
    fail((p && p.detail) || 'Something went wrong. Please try again.');
  }

  if (!transactionId || !requestId || !token) {
    fail('This verification link is invalid or has expired.');
    for (const b of document.querySelectorAll('.actions button')) b.disabled = true;
  } else {
    // The buttons are disabled in the HTML until they answer: a click
    // before this script ran would otherwise be lost.
    for (const b of document.querySelectorAll('.actions button')) {
      b.addEventListener('click', () => send(b.dataset.result));
      b.disabled = false;
    }
  }
})();
