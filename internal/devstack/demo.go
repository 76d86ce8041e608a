package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/payreq/payreq/web"
)

// demoMerchant is the integration guide's example, runnable: a merchant back
// end that creates a payment request and a checkout session server-side
// (with the API key, which never reaches the browser) and a page that mounts
// PayCheckout. Local stack only.
func demoMerchant(apiBase, apiKey string) http.Handler {
	mux := http.NewServeMux()
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(method, url string, body any, out any) error {
		b, _ := json.Marshal(body)
		req, err := http.NewRequest(method, url, bytes.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", apiKey)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
		}
		return json.Unmarshal(raw, out)
	}
	mux.HandleFunc("POST /demo/api/checkout", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Amount json.Number `json:"amount"`
			Unit   string      `json:"unit"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&in)
		if in.Amount == "" {
			in.Amount = "25.00"
		}
		if in.Unit == "" {
			in.Unit = "EUR"
		}
		var created struct {
			ID int64 `json:"id"`
		}
		if err := call("POST", apiBase+"/payment-requests", map[string]any{"amount": in.Amount, "unit": in.Unit,
			"recipientName": "Demo Coffee Shop", "referenceId": "demo-" + strconv.FormatInt(time.Now().UnixNano(), 36)}, &created); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var session struct {
			Token      string `json:"token"`
			PaymentURL string `json:"paymentUrl"`
		}
		if err := call("POST", apiBase+"/payment-requests/"+strconv.FormatInt(created.ID, 10)+"/checkout-session", map[string]any{}, &session); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]string{"requestId": strconv.FormatInt(created.ID, 10),
			"token": session.Token, "paymentUrl": session.PaymentURL})
	})
	serve := func(w http.ResponseWriter, r *http.Request, file string) {
		b, err := fs.ReadFile(web.Files, file)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(file)))
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; frame-src 'self'")
		_, _ = w.Write(b)
	}
	mux.HandleFunc("GET /demo", func(w http.ResponseWriter, r *http.Request) { serve(w, r, "demo/index.html") })
	mux.HandleFunc("GET /demo/assets/{file}", func(w http.ResponseWriter, r *http.Request) { serve(w, r, "demo/"+r.PathValue("file")) })
	return mux
}
