package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ralphloop/ralph/config"
)

// SignatureHeader carries the HMAC-SHA256 of the body, keyed with the
// value of secret_env, as "sha256=<hex>".
const SignatureHeader = "X-Ralph-Signature"

// EventHeader names the event, so a receiver can route without parsing.
const EventHeader = "X-Ralph-Event"

// webhook POSTs each notification as JSON.
type webhook struct {
	url     string
	secret  []byte
	timeout time.Duration // per attempt
	retries int
	backoff time.Duration // before the first retry; doubled after each
	client  *http.Client
}

func newWebhook(c config.Notify, env func(string) string) (*webhook, error) {
	raw := c.URL
	if c.URLEnv != "" {
		raw = env(c.URLEnv)
		if raw == "" {
			return nil, fmt.Errorf("url_env names %s, which is not set; export it with the webhook's URL", c.URLEnv)
		}
		if err := config.CheckWebhookURL(raw, false); err != nil {
			return nil, fmt.Errorf("%s holds %v", c.URLEnv, err)
		}
	}
	w := &webhook{url: raw, timeout: c.Timeout.Duration, retries: *c.Retries, backoff: 500 * time.Millisecond,
		client: &http.Client{}}
	if c.SecretEnv != "" {
		v := env(c.SecretEnv)
		if v == "" {
			return nil, fmt.Errorf("secret_env names %s, which is not set; export the signing key or remove secret_env", c.SecretEnv)
		}
		w.secret = []byte(v)
	}
	return w, nil
}

// Sign is the SignatureHeader value of body under key.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// retryable marks a failure worth another attempt.
type retryable struct{ error }

func (w *webhook) Send(ctx context.Context, e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	wait := w.backoff
	for attempt := 0; ; attempt++ {
		err = w.post(ctx, e.Event, body)
		var r retryable
		if err == nil || !errors.As(err, &r) || attempt >= w.retries || ctx.Err() != nil {
			if err != nil && attempt > 0 {
				err = fmt.Errorf("%w (after %d attempts)", err, attempt+1)
			}
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retry cancelled: %v)", err, ctx.Err())
		}
		wait *= 2
	}
}

func (w *webhook) post(ctx context.Context, event string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ralph")
	req.Header.Set(EventHeader, event)
	if w.secret != nil {
		req.Header.Set(SignatureHeader, Sign(w.secret, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		// The URL may be a secret (a Slack webhook): say where without it.
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return retryable{fmt.Errorf("webhook %s did not answer within %s", req.URL.Host, w.timeout)}
		}
		if ctx.Err() != nil { // the run's end gave up waiting for this sink
			return fmt.Errorf("webhook %s: cancelled before it answered", req.URL.Host)
		}
		return retryable{fmt.Errorf("webhook %s: %v", req.URL.Host, errors.Unwrap(err))}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // drained so the connection is reused; its content is not used
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return retryable{fmt.Errorf("webhook %s answered %s", req.URL.Host, resp.Status)}
	}
	return fmt.Errorf("webhook %s answered %s; check the URL", req.URL.Host, resp.Status)
}
