// Package web holds the browser assets: the hosted checkout page (checkout/), the PayCheckout
// component (sdk/) and the demo merchant page (demo/). They are plain files, served as they are.
//
// Paths the checkout handler serves:
//
//	GET /checkout                 checkout/index.html
//	GET /checkout/3ds             checkout/acs.html (sandbox 3-D Secure page)
//	GET /checkout/assets/<file>   checkout/<file>   (checkout.css, checkout.js, acs.js)
//	GET /paycheckout.js           sdk/paycheckout.js
//	GET /paycheckout.d.ts         sdk/paycheckout.d.ts
//	GET /demo                     demo/index.html
//	GET /demo/assets/<file>       demo/<file>       (demo.css, demo.js)
package web

import "embed"

//go:embed checkout sdk demo
var Files embed.FS
