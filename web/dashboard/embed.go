// Package dashboard holds the merchant dashboard's assets
// (internal/dashboard serves them; its pages are written in Go):
// dashboard.css and dashboard.js are served at /dashboard/assets/.
// No inline script or style anywhere: the pages run under a strict CSP.
package dashboard

import "embed"

// Files are the assets.
//
//go:embed *.css *.js
var Files embed.FS
