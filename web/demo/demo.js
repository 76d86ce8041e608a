/* Demo merchant page: mints a checkout session on the demo back end, then opens PayCheckout. */
(() => {
  'use strict';
  const $ = (id) => document.getElementById(id);

  function log(name, data) {
    const li = document.createElement('li');
    li.textContent = new Date().toLocaleTimeString() + '  ' + name + ' ' + JSON.stringify(data === undefined ? {} : data);
    $('log').appendChild(li);
  }

  function busy(on) {
    $('pay-inline').disabled = on;
    $('pay-modal').disabled = on;
  }

  function ended(name) {
    return (data) => {
      log(name, data);
      $('close').disabled = true;
      busy(false);
    };
  }

  async function pay(mode) {
    $('error').textContent = '';
    busy(true);
    let session;
    try {
      // The demo back end creates a payment request and mints a checkout session token with the
      // merchant API key, server-side. The browser only ever sees the short-lived checkout token.
      const res = await fetch('/demo/api/checkout', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
        body: JSON.stringify({ amount: $('amount').value.trim(), unit: $('unit').value.trim().toUpperCase() })
      });
      session = await res.json().catch(() => null);
      if (!res.ok || !session || !session.paymentUrl) {
        throw new Error((session && (session.detail || session.title)) || 'HTTP ' + res.status);
      }
    } catch (e) {
      $('error').textContent = 'Could not start the checkout: ' + e.message;
      busy(false);
      return;
    }
    log('session', { requestId: session.requestId, mode });
    try {
      window.PayCheckout.init({
        mode,
        paymentUrl: session.paymentUrl,
        containerId: mode === 'inline' ? 'checkout' : undefined,
        onReady: (d) => log('onReady', d),
        onSuccess: ended('onSuccess'),
        onFailure: ended('onFailure'),
        onPending: ended('onPending'),
        onCancel: ended('onCancel')
      });
      $('close').disabled = false;
      if (mode === 'inline') $('checkout').querySelector('p.muted')?.remove();
    } catch (e) {
      $('error').textContent = e.message;
      busy(false);
    }
  }

  $('pay-inline').addEventListener('click', () => pay('inline'));
  $('pay-modal').addEventListener('click', () => pay('modal'));
  $('close').addEventListener('click', () => {
    window.PayCheckout.destroy();
    log('destroy()', {});
    $('close').disabled = true;
    busy(false);
  });
  $('order').addEventListener('submit', (e) => e.preventDefault());
})();
