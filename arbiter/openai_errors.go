package arbiter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// transportError is a model provider's failure as the caller sees it: one
// sentence naming the server and the fix, never the API key, and the
// sentinel (ErrFatal, ErrContextLength) a caller branches on, if any.
type transportError struct {
	msg  string
	kind error
}

func (e *transportError) Error() string { return e.msg }
func (e *transportError) Unwrap() error { return e.kind }

// attemptError is one failed request with what the transport saw of it.
type attemptError struct {
	err      error
	status   int
	header   http.Header
	timedOut bool // model.timeout ran out, not the caller's context
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

type failClass int

const (
	failRejected      failClass = iota // the server refused this request; retrying will not help
	failFatal                          // nothing this run sends can succeed: key, model, quota
	failContextLength                  // the prompt is too long for the model
	failJSONMode                       // the server does not take response_format
	failStreamOptions                  // the server does not take stream_options
	failNotStreamed                    // the server answered a stream request without streaming
	failRateLimited                    // 429: wait as told, then try again
	failTransient                      // 5xx, timeout, dropped connection: back off and retry
)

// failure is a classified attemptError.
type failure struct {
	class   failClass
	status  int
	code    string // the API error code, e.g. "model_not_found"
	event   bool   // an error event inside a 200 stream; status is what its code stands for
	detail  string // what went wrong, scrubbed of secrets, naming the host
	brief   string // the same without the host, for errors that name the server; "" means detail
	wait    time.Duration
	hasWait bool
}

// classify decides what a failed attempt means.
func (m *openAIModel) classify(err error) failure {
	var ae *attemptError
	if !errors.As(err, &ae) {
		ae = &attemptError{err: err}
	}
	f := failure{status: ae.status}
	if ae.header != nil {
		f.wait, f.hasWait = RetryAfter(ae.header, m.now())
	}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var message, param string
	switch {
	case ae.timedOut:
		f.class, f.detail = failTransient, fmt.Sprintf("no answer from %s within %s (model.timeout)", m.host(), m.timeout)
		return f
	case errors.Is(err, errAnswerTooLarge):
		f.class, f.detail = failRejected, fmt.Sprintf("the answer from %s exceeded %d bytes", m.shown, m.maxResp)
		return f
	case errors.Is(err, errNotStreamed):
		f.class, f.detail = failNotStreamed, fmt.Sprintf("%s answered a stream request without streaming", m.shown)
		return f
	case errors.Is(err, errNoChoices):
		f.class, f.detail = failRejected, fmt.Sprintf("%s answered without any choice", m.shown)
		return f
	case errors.As(err, &apiErr):
		f.status = apiErr.HTTPStatusCode // 0 for an error event inside a stream that began with 200
		message, f.code = apiErr.Message, codeString(apiErr.Code)
		if apiErr.Param != nil {
			param = *apiErr.Param
		}
		if f.code == "" {
			f.code = apiErr.Type
		}
		if f.status == 0 {
			// HTTP 200 and then an error event: its code and type say
			// what the status would have.
			f.event = true
			f.status = eventStatus(codeString(apiErr.Code), apiErr.Type, message)
			if f.status == http.StatusTooManyRequests && quotaCode(codeString(apiErr.Code), apiErr.Type) {
				f.code = "insufficient_quota"
			}
		}
	case errors.As(err, &reqErr):
		f.status = max(f.status, reqErr.HTTPStatusCode)
		message = string(reqErr.Body)
	case isReasoningLimit(err):
		f.class = failFatal
		f.detail = fmt.Sprintf("model %s takes no temperature and no max_tokens: remove model.temperature (%v)", m.cfg.Model, err)
		return f
	default:
		f.class, f.detail = failTransient, m.networkDetail(err)
		return f
	}
	f.detail, f.brief = m.statusDetail(f, message)
	f.class = m.classOf(f, message, param)
	return f
}

// eventStatus is the HTTP status an error event sent inside a 200 stream
// stands for, from its code and type: OpenAI's codes and types
// (invalid_api_key, model_not_found, insufficient_quota,
// context_length_exceeded, rate_limit_exceeded, server_error), those of
// Anthropic-style gateways (authentication_error, permission_error,
// not_found_error, rate_limit_error, overloaded_error), and OpenRouter's,
// whose code is the HTTP status itself. 0 when nothing says.
func eventStatus(code, typ, message string) int {
	if n, err := strconv.Atoi(code); err == nil && n >= 400 && n <= 599 {
		return n
	}
	for _, c := range []string{strings.ToLower(code), strings.ToLower(typ)} {
		switch c {
		case "invalid_api_key", "incorrect_api_key", "invalid_authentication", "authentication_error", "auth_error",
			"unauthorized", "invalid_auth", "expired_api_key":
			return http.StatusUnauthorized
		case "permission_error", "permission_denied", "forbidden", "unsupported_country_region_territory":
			return http.StatusForbidden
		case "model_not_found", "not_found_error", "model_not_available":
			return http.StatusNotFound
		case "insufficient_quota", "insufficient_credits", "insufficient_credits_error", "insufficient_balance",
			"billing_hard_limit_reached", "billing_not_active", "rate_limit_exceeded", "rate_limit_error",
			"requests", "tokens", "too_many_requests":
			return http.StatusTooManyRequests
		case "context_length_exceeded", "string_above_max_length", "request_too_large":
			return http.StatusRequestEntityTooLarge
		case "server_error", "server_is_overloaded", "api_error", "overloaded_error", "internal_error",
			"service_unavailable", "provider_error", "provider_unavailable":
			return http.StatusServiceUnavailable
		case "timeout":
			return http.StatusGatewayTimeout
		}
	}
	if contextLengthText(strings.ToLower(message)) {
		return http.StatusRequestEntityTooLarge
	}
	return 0
}

// quotaCode reports whether an error event's code or type says the
// account is out of money rather than over a rate.
func quotaCode(code, typ string) bool {
	for _, c := range []string{strings.ToLower(code), strings.ToLower(typ)} {
		switch c {
		case "insufficient_quota", "insufficient_credits", "insufficient_credits_error", "insufficient_balance",
			"billing_hard_limit_reached", "billing_not_active":
			return true
		}
	}
	return code == "402"
}

func (m *openAIModel) classOf(f failure, message, param string) failClass {
	lower := strings.ToLower(message)
	switch {
	case f.status == 0: // an error event that names no known code or type
		if contextLengthText(lower) {
			return failContextLength
		}
		return failTransient
	case f.status == http.StatusPaymentRequired: // OpenRouter: out of credits
		return failFatal
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden:
		return failFatal
	case f.status == http.StatusNotFound:
		return failFatal
	case f.status == http.StatusTooManyRequests:
		// Only an exhausted account is fatal. Many rate limits mention
		// quotas in passing (Azure links aka.ms/oai/quotaincrease, Gemini
		// says "check quota") and pass in seconds.
		if f.code == "insufficient_quota" || strings.Contains(lower, "insufficient_quota") || strings.Contains(lower, "exceeded your current quota") {
			return failFatal
		}
		return failRateLimited
	case f.code == "context_length_exceeded" || f.status == http.StatusRequestEntityTooLarge || contextLengthText(lower):
		return failContextLength
	case f.status == http.StatusBadRequest || f.status == http.StatusUnprocessableEntity:
		switch {
		case param == "response_format" || strings.Contains(lower, "response_format") || strings.Contains(lower, "json_object") ||
			strings.Contains(lower, "json mode"):
			return failJSONMode
		case param == "stream_options" || strings.Contains(lower, "stream_options") || strings.Contains(lower, "include_usage"):
			return failStreamOptions
		}
		return failRejected
	case f.status == http.StatusRequestTimeout || f.status == http.StatusConflict || f.status == 425 || f.status >= 500:
		return failTransient
	}
	return failRejected
}

var contextLengthRE = regexp.MustCompile(`context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long|input is too long|exceeds the (model's )?max`)

func contextLengthText(lower string) bool { return contextLengthRE.MatchString(lower) }

func isReasoningLimit(err error) bool {
	return errors.Is(err, openai.ErrReasoningModelLimitationsOther) || errors.Is(err, openai.ErrReasoningSamplingUnsupported) ||
		errors.Is(err, openai.ErrReasoningModelMaxTokensDeprecated)
}

func codeString(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	return fmt.Sprint(c)
}

// statusDetail describes an HTTP failure, for a retry notice ("503
// Service Unavailable from host: message") and for a final error, which
// names the server already ("503 Service Unavailable: message").
func (m *openAIModel) statusDetail(f failure, message string) (detail, brief string) {
	msg := m.scrub(message)
	status := f.status
	if f.event {
		what := cmp.Or(f.code, "error")
		detail = fmt.Sprintf("error event %s from %s mid-answer", what, m.host())
		brief = fmt.Sprintf("error event %s mid-answer", what)
	} else if status > 0 {
		detail = fmt.Sprintf("%d %s from %s", status, http.StatusText(status), m.host())
		brief = fmt.Sprintf("%d %s", status, http.StatusText(status))
	} else {
		detail = fmt.Sprintf("error from %s mid-answer", m.host())
		brief = "error event mid-answer"
	}
	if msg != "" {
		detail += ": " + msg
		brief += ": " + msg
	}
	return detail, brief
}

// networkDetail describes a failure below HTTP, hiding the URL (which may
// carry credentials) behind the host.
func (m *openAIModel) networkDetail(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fmt.Sprintf("%s dropped the connection mid-answer", m.host())
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("%s did not answer in time (%s)", m.host(), m.scrub(err.Error()))
	}
	return fmt.Sprintf("cannot reach %s: %s", m.host(), m.scrub(err.Error()))
}

// keyLikeRE matches API-key-shaped tokens (sk-…, sk-proj-…) that a server
// may echo back.
var keyLikeRE = regexp.MustCompile(`\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{6,}[A-Za-z0-9_\-*.]*`)

// scrub makes server text safe to show: no API key, one line, bounded.
func (m *openAIModel) scrub(s string) string {
	if m.key != "" {
		s = strings.ReplaceAll(s, m.key, "[REDACTED]")
	}
	return truncate(oneLine(keyLikeRE.ReplaceAllString(s, "[REDACTED]")), 300)
}

// final turns a failure that ends the completion into its error: what
// happened, the fix, then the server's own words.
func (m *openAIModel) final(ctx context.Context, f failure) error {
	why := cmp.Or(f.brief, f.detail)
	switch f.class {
	case failContextLength:
		return &transportError{kind: ErrContextLength, msg: fmt.Sprintf("model %s refused the prompt as too long (%s)", m.cfg.Model, why)}
	case failFatal:
		return &transportError{kind: ErrFatal, msg: m.fatalMessage(ctx, f, why)}
	case failJSONMode, failStreamOptions, failNotStreamed, failRejected:
		return &transportError{msg: fmt.Sprintf("%s rejected the request (%s)", m.shown, why)}
	}
	return &transportError{msg: f.detail}
}

func (m *openAIModel) fatalMessage(ctx context.Context, f failure, why string) string {
	switch {
	case f.status == http.StatusUnauthorized:
		return fmt.Sprintf("%s refused the API key: set %s to a valid key (%s)", m.shown, m.keyEnv, why)
	case f.status == http.StatusForbidden:
		return fmt.Sprintf("%s denied access: check that the key in %s may use model %s (%s)", m.shown, m.keyEnv, m.cfg.Model, why)
	case f.status == http.StatusNotFound && (f.code == "model_not_found" || strings.Contains(strings.ToLower(why), "model")):
		return fmt.Sprintf("model %s is not served at %s: %s (%s)", m.cfg.Model, m.shown, m.modelsHint(ctx), why)
	case f.status == http.StatusNotFound:
		return fmt.Sprintf("%s/chat/completions does not exist: set model.base_url to the API root, which usually ends in /v1 (%s)", m.shown, why)
	case f.status == http.StatusTooManyRequests || f.status == http.StatusPaymentRequired:
		return fmt.Sprintf("%s says the account is out of quota: check its plan and billing (%s)", m.shown, why)
	}
	return f.detail
}

// modelsHint asks the server which models it serves, briefly; the answer
// is the fix for an unserved model.
func (m *openAIModel) modelsHint(ctx context.Context) string {
	const fix = "set model.model to one it serves"
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := m.client.ListModels(lctx)
	if err != nil || len(list.Models) == 0 {
		return fix
	}
	ids := make([]string, 0, len(list.Models))
	for _, md := range list.Models {
		ids = append(ids, md.ID)
	}
	slices.Sort(ids)
	const show = 10
	more := ""
	if len(ids) > show {
		more = fmt.Sprintf(" and %d more", len(ids)-show)
		ids = ids[:show]
	}
	return fmt.Sprintf("%s: %s%s", fix, m.scrub(strings.Join(ids, ", ")), more)
}
