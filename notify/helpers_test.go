package notify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

type senderFunc func(ctx context.Context, e Event) error

func (f senderFunc) Send(ctx context.Context, e Event) error { return f(ctx, e) }

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fmtSscanf reads the count a NotifyFailed drop message starts with.
func fmtSscanf(msg string, n *int) (int, error) { return fmt.Sscanf(msg, "%d notification(s)", n) }

// neverAnswers is a webhook that accepts connections and never answers,
// until hang is closed.
func neverAnswers(tb testing.TB) (hang chan struct{}, url string) {
	hang = make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	tb.Cleanup(srv.Close)
	return hang, srv.URL
}
