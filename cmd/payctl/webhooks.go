package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/payreq/payreq/internal/notify"
)

// webhooksListen runs a local notification receiver that prints every
// notification and whether its signatures verify: the tool merchants use
// while integrating. It runs until ctx ends (Ctrl-C).
func webhooksListen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("webhooks listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 4000, "port on 127.0.0.1")
	apiKey := fs.String("api-key", "", "merchant API key (verifies X-Signature)")
	secret := fs.String("webhook-secret", "", "merchant webhook secret (verifies webhook-signature and the JSON variant)")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	if *apiKey == "" && *secret == "" {
		return usageError("give --api-key and/or --webhook-secret to verify signatures")
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "payctl: listening for notifications on http://%s/ (Ctrl-C to stop)\n", l.Addr())
	srv := &http.Server{Handler: notify.NewReceiver(*apiKey, *secret, stdout), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
