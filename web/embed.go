// Package web holds the browser assets: the hosted checkout page (checkout/), the PayCheckout
// component (sdk/), the demo merchant page (demo/) and the favicon. The hosted page is rendered once
// per language (i18n.go, checkout/i18n/); the other files are served as they are, the scripts and
// styles also in their generated gzip and brotli forms (compressed.go, compressed/).
//
// Paths the checkout handler serves:
//
//	GET /checkout                 checkout/index.html, in the negotiated language
//	GET /checkout/3ds             checkout/acs.html (sandbox 3-D Secure page)
//	GET /checkout/assets/<file>   checkout/<file>   (checkout.css, checkout.js, acs.js)
//	GET /paycheckout.js           sdk/paycheckout.js
//	GET /paycheckout.d.ts         sdk/paycheckout.d.ts
//	GET /favicon.ico              favicon.ico
//	GET /demo                     demo/index.html
//	GET /demo/assets/<file>       demo/<file>       (demo.css, demo.js)
package web

import "embed"

//go:embed checkout sdk demo favicon.ico
var Files embed.FS
