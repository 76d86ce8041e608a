// Fake checkout page (test fixture): posts to its parent whatever the test harness asks for.
(() => {
  window.addEventListener('message', (e) => {
    const c = e.data;
    if (c && c.cmd === 'post') for (const m of c.msgs) window.parent.postMessage(m, '*');
    if (c && c.cmd === 'go') location.assign(c.url);
  });
  window.parent.postMessage({ fake: 'loaded' }, '*');
})();
