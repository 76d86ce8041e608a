// Merchant dashboard: the only script of its pages, loaded from the
// dashboard's own origin (the CSP allows no inline script). Pages work
// without it; it asks for confirmation before destructive buttons marked
// data-confirm and shows amounts in the viewer's locale.
(() => {
  "use strict";
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("button[data-confirm]") : null;
    if (button && !window.confirm(button.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  });

  const str = (v) => (v == null ? '' : String(v));
  // The viewer's locale: the server's reading of Accept-Language (<html data-locale>), else the browser's.
  const LOCALE = (() => {
    for (const l of [document.documentElement.getAttribute('data-locale'), ...(navigator.languages || [])]) {
      try { if (l && Intl.NumberFormat.supportedLocalesOf([l]).length) return l; } catch (e) { /* not a locale */ }
    }
    return 'en';
  })();
  // money() is the hosted page's own (web/checkout/checkout.js), character for character:
  // TestDashboardMoneyIsTheHostedPagesFunction keeps them the same.
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
  // Whole numbers (counts) in the viewer's locale.
  const count = (n) => { try { return new Intl.NumberFormat(LOCALE).format(n); } catch (e) { return String(n); } };

  function localize(root) {
    for (const el of root.querySelectorAll("data.money[data-unit]")) {
      el.textContent = money(el.getAttribute("value"), el.getAttribute("data-unit"));
    }
    for (const el of root.querySelectorAll("text[data-amount][data-unit]")) { // chart labels
      el.textContent = money(el.getAttribute("data-amount"), el.getAttribute("data-unit"));
    }
    for (const el of root.querySelectorAll("data.count")) {
      el.textContent = count(Number(el.getAttribute("value")));
    }
  }
  localize(document);

  // Live blocks ([data-live-refresh] with an id; data-running while a batch
  // file runs): the page is fetched again every few seconds and the blocks
  // are swapped for their new copies, until nothing runs. Polling stops after
  // 20 minutes so that an open tab does not keep an idle session alive.
  const LIVE_MS = 3000, LIVE_FOR_MS = 20 * 60 * 1000;
  const started = Date.now();
  async function refresh() {
    if (Date.now() - started > LIVE_FOR_MS) return;
    let running = true;
    try {
      const res = await fetch(location.href, { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/html" } });
      if (res.ok && !res.redirected) {
        const doc = new DOMParser().parseFromString(await res.text(), "text/html");
        for (const el of document.querySelectorAll("[data-live-refresh][id]")) {
          const fresh = doc.getElementById(el.id);
          if (fresh) {
            localize(fresh);
            el.replaceWith(document.adoptNode(fresh));
          }
        }
        running = !!document.querySelector("[data-live-refresh][data-running]");
      } else if (res.redirected || res.status === 401 || res.status === 403) {
        running = false; // signed out: the next reload shows the sign-in page
      }
    } catch (e) { /* offline for a moment: try again */ }
    if (running) setTimeout(refresh, LIVE_MS);
  }
  if (document.querySelector("[data-live-refresh][data-running]") && window.fetch && window.DOMParser) {
    setTimeout(refresh, LIVE_MS);
  }
})();
