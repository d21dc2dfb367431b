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
	"net/url"
	"strings"
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
		if err := checkURL(raw, false); err != nil {
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

// checkWebhook: a webhook has its URL in url_env (or, without a secret in
// it, in url), not both.
func checkWebhook(n *config.Notify) error {
	switch {
	case n.URL == "" && n.URLEnv == "":
		return errors.New("a webhook needs url_env, the environment variable that holds its URL (a Slack webhook URL is itself a secret)")
	case n.URL != "" && n.URLEnv != "":
		return errors.New("a webhook has url or url_env, not both; keep url_env")
	case n.URL != "":
		if err := checkURL(n.URL, true); err != nil {
			return fmt.Errorf("url %v", err)
		}
	}
	return nil
}

// checkURL refuses a webhook URL that does not parse as http(s) or, when
// inConfig, carries a credential a config file would show in clear: a
// user or password, or a secret-looking query parameter, or a Slack
// webhook path (whose path is the secret).
func checkURL(raw string, inConfig bool) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL; write it like https://example.com/hook", config.RedactURL(raw))
	}
	if !inConfig {
		return nil
	}
	fix := "; put the URL in an environment variable and name it with url_env instead"
	if u.User != nil {
		return fmt.Errorf("%s carries a credential in clear%s", config.RedactURL(raw), fix)
	}
	for k := range u.Query() {
		if config.IsSecretQueryKey(k) {
			return fmt.Errorf("%s://%s%s carries a credential in clear (query parameter %s)%s", u.Scheme, u.Host, u.Path, k, fix)
		}
	}
	if strings.EqualFold(u.Hostname(), "hooks.slack.com") {
		return fmt.Errorf("%s://%s/… is a Slack webhook URL, which is itself a credential in clear%s", u.Scheme, u.Host, fix)
	}
	return nil
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
