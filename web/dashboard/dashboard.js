// Merchant dashboard: the only script, loaded from the dashboard's own origin
// (the CSP allows no inline script). Pages work without it; it only asks for
// confirmation before destructive buttons marked data-confirm.
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target instanceof Element ? event.target.closest("button[data-confirm]") : null;
  if (button && !window.confirm(button.getAttribute("data-confirm"))) {
    event.preventDefault();
  }
});
