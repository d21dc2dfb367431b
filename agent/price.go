package agent

import (
	"regexp"
	"strconv"
	"strings"
)

// PriceSource names where the built-in price table comes from and when
// it was read (docs/agents.md, "Prices").
const PriceSource = "LiteLLM model_prices_and_context_window.json (github.com/BerriAI/litellm), read 2026-11-25"

// prices is the built-in table: USD per million tokens for the models the
// four CLIs run by default and commonly, keyed by the model's name as the
// vendor's API spells it. Prices are the base tier (prompts up to 200k
// tokens where the vendor charges more above; standard, not priority or
// batch). Reasoning is 0: priced as output, as the three vendors bill it.
var prices = map[string]Price{
	// Anthropic (Claude Code; OpenCode with an Anthropic model). Cache
	// writes at the 5-minute rate.
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-6":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-7":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-sonnet-4-6": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-sonnet-5":   {Input: 2, Output: 10, CacheRead: 0.2, CacheWrite: 2.5},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	// OpenAI (Codex; OpenCode with an OpenAI model). Most charge nothing to
	// write the cache.
	"gpt-5":              {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-codex":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":         {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5.1-codex":      {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5.1-codex-max":  {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5.1-codex-mini": {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5.2-codex":      {Input: 1.75, Output: 14, CacheRead: 0.175},
	"gpt-5.3-codex":      {Input: 1.75, Output: 14, CacheRead: 0.175},
	"gpt-5.4":            {Input: 2.5, Output: 15, CacheRead: 0.25},
	"gpt-5.4-mini":       {Input: 0.75, Output: 4.5, CacheRead: 0.075},
	"gpt-5.4-nano":       {Input: 0.2, Output: 1.25, CacheRead: 0.02},
	"gpt-5.5":            {Input: 5, Output: 30, CacheRead: 0.5},
	"gpt-5.6":            {Input: 5, Output: 30, CacheRead: 0.5, CacheWrite: 6.25},
	"gpt-5.6-sol":        {Input: 5, Output: 30, CacheRead: 0.5, CacheWrite: 6.25},
	"gpt-5.6-terra":      {Input: 2.5, Output: 15, CacheRead: 0.25, CacheWrite: 3.125},
	"gpt-5.6-luna":       {Input: 1, Output: 6, CacheRead: 0.1, CacheWrite: 1.25},
	// Google (Gemini CLI; OpenCode with a Google model).
	"gemini-2.5-pro":         {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gemini-2.5-flash":       {Input: 0.3, Output: 2.5, CacheRead: 0.03},
	"gemini-2.5-flash-lite":  {Input: 0.1, Output: 0.4, CacheRead: 0.01},
	"gemini-3-pro-preview":   {Input: 2, Output: 12, CacheRead: 0.2},
	"gemini-3-flash-preview": {Input: 0.5, Output: 3, CacheRead: 0.05},
	"gemini-3.1-pro-preview": {Input: 2, Output: 12, CacheRead: 0.2},
	"gemini-3.1-flash-lite":  {Input: 0.25, Output: 1.5, CacheRead: 0.025},
	"gemini-3.5-flash":       {Input: 1.5, Output: 9, CacheRead: 0.15},
}

// priceAliases are names a CLI takes or reports for a model of the table.
// Gemini CLI's default "auto" models route each request to the pro or the
// flash model of their generation: they are priced as the pro, the
// dearer, so that a budget errs early rather than late.
var priceAliases = map[string]string{
	"auto-gemini-2.5": "gemini-2.5-pro",
	"auto-gemini-3":   "gemini-3-pro-preview",
	"gemini-3-pro":    "gemini-3-pro-preview",
	"gemini-3-flash":  "gemini-3-flash-preview",
	"gemini-3.1-pro":  "gemini-3.1-pro-preview",
	"claude-4-opus":   "claude-opus-4",
	"claude-4-sonnet": "claude-sonnet-4",
}

// dateSuffix is a model's snapshot date: "-20250929", "-2025-08-07".
var dateSuffix = regexp.MustCompile(`-(?:\d{8}|\d{4}-\d{2}-\d{2})$`)

// bracketSuffix is a variant a CLI appends to a model's name, as Claude
// Code's "claude-opus-4-8[1m]" (its 1M-token context window).
var bracketSuffix = regexp.MustCompile(`\[[^\]]*\]$`)

// Price matches: how LookupModelPrice found a model's price.
const (
	PriceExact  = "exact"  // the table names the model
	PriceAlias  = "alias"  // a name the CLI uses for a model of the table
	PriceFamily = "family" // the nearest version of its family the table knows
)

// ModelPrice is the table's price for a model: the price, the table's
// model it is (Model), and how it was found (Match: PriceExact,
// PriceAlias or PriceFamily).
type ModelPrice struct {
	Price        Price
	Model, Match string
}

// LookupPrice is the built-in price of a model (LookupModelPrice without
// how it was found).
func LookupPrice(model string) (Price, bool) {
	p, ok := LookupModelPrice(model)
	return p.Price, ok
}

// LookupModelPrice is the built-in price of a model, found by its name as
// a CLI reports it or takes it: case and a provider prefix
// ("anthropic/claude-sonnet-4-5", "models/gemini-2.5-pro") do not matter,
// nor does a snapshot date ("claude-sonnet-4-5-20250929"), "-latest" or a
// bracketed variant ("[1m]"). A model the table does not name is priced as
// the nearest version of its family that it does (familyPrice): the
// newest not newer than it, else the oldest.
func LookupModelPrice(model string) (ModelPrice, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	m = bracketSuffix.ReplaceAllString(m, "")
	m = strings.TrimSuffix(m, "-latest")
	m = dateSuffix.ReplaceAllString(m, "")
	if m == "" {
		return ModelPrice{}, false
	}
	if p, ok := prices[m]; ok {
		return ModelPrice{Price: p, Model: m, Match: PriceExact}, true
	}
	if a, ok := priceAliases[m]; ok {
		return ModelPrice{Price: prices[a], Model: a, Match: PriceAlias}, true
	}
	return familyPrice(m)
}

// modelFamilies read a model's family and version from its name: Claude's
// kind and major version (claude-opus-4-8, and the older claude-3-5-haiku),
// Gemini's major version and tier (gemini-3.8-flash, gemini-3.1-flash-lite,
// gemini-3-pro-preview), OpenAI's major version and variant (gpt-5.6-sol,
// gpt-5.1-codex-mini). Submatches: family words, major, minor.
var modelFamilies = []struct {
	re                   *regexp.Regexp
	family, major, minor int
}{
	{regexp.MustCompile(`^claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-|$)`), 1, 2, 3},
	{regexp.MustCompile(`^claude-(\d+)(?:-(\d{1,2}))?-(opus|sonnet|haiku)(?:-|$)`), 3, 1, 2},
	{regexp.MustCompile(`^gemini-(\d+)(?:\.(\d+))?-(flash-lite|flash|pro)(?:-|$)`), 3, 1, 2},
	{regexp.MustCompile(`^gpt-(\d+)(?:\.(\d+))?(?:-([a-z-]+?))?(?:-preview)?$`), 3, 1, 2},
}

// modelFamily is a model's family ("claude opus 4", "gemini 3 flash",
// "gpt 5 codex-mini") and minor version; false when its name is of no
// family modelFamilies know.
func modelFamily(m string) (family string, minor int, ok bool) {
	for i, f := range modelFamilies {
		s := f.re.FindStringSubmatch(m)
		if s == nil {
			continue
		}
		minor, _ = strconv.Atoi(s[f.minor]) // digits, or "" for 0
		return strconv.Itoa(i) + " " + s[f.family] + " " + s[f.major], minor, true
	}
	return "", 0, false
}

// familyPrice is the price of the table's model of m's family whose
// version is nearest below m's (the newest not newer), else the oldest
// above it: "claude-opus-4-8" is priced as claude-opus-4-7,
// "gemini-3.8-flash" as gemini-3.5-flash.
func familyPrice(m string) (ModelPrice, bool) {
	fam, minor, ok := modelFamily(m)
	if !ok {
		return ModelPrice{}, false
	}
	best, bestMinor := "", 0
	for name := range prices {
		f, v, ok := modelFamily(name)
		if !ok || f != fam {
			continue
		}
		below, bestBelow := v <= minor, bestMinor <= minor
		switch {
		case best == "",
			below && !bestBelow,
			below && bestBelow && (v > bestMinor || v == bestMinor && name < best),
			!below && !bestBelow && (v < bestMinor || v == bestMinor && name < best):
			best, bestMinor = name, v
		}
	}
	if best == "" {
		return ModelPrice{}, false
	}
	return ModelPrice{Price: prices[best], Model: best, Match: PriceFamily}, true
}

// PriceNote says how the built-in table prices model when it does not
// name it exactly: "auto-gemini-2.5 is priced as gemini-2.5-pro (alias)";
// "" when it names it, or has no price for it.
func PriceNote(model string) string {
	p, ok := LookupModelPrice(model)
	if !ok || p.Match == PriceExact {
		return ""
	}
	return model + " is priced as " + p.Model + " (" + p.Match + ")"
}

// ArgsModel is the model named in a CLI's arguments (--model X,
// --model=X, -m X, -m=X; the last wins), or "".
func ArgsModel(args []string) string {
	model := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--model" || a == "-m":
			if i+1 < len(args) {
				model = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--model="):
			model = strings.TrimPrefix(a, "--model=")
		case strings.HasPrefix(a, "-m="):
			model = strings.TrimPrefix(a, "-m=")
		}
	}
	return model
}

// DefaultModel is the model a CLI runs when its arguments name none, as
// far as ralph can know it before the call: Gemini CLI's default (read
// from the pinned 0.61 package: DEFAULT_GEMINI_MODEL_AUTO); "" for the
// others, whose default lives in the account or in a catalogue the CLI
// fetches.
func DefaultModel(cli string) string { return backendFor(cli).DefaultModel }

// ConfiguredModel is the model a call of cli with args runs as far as
// ralph can know before it starts: the one args name, else the CLI's
// default ("" when neither is known).
func ConfiguredModel(cli string, args []string) string {
	if m := ArgsModel(args); m != "" {
		return m
	}
	return DefaultModel(cli)
}

// InitModel is the model `ralph init` names in [agent] args for a CLI that
// reports tokens but no cost and whose default model ralph cannot know
// before the call (codex picks it from a catalogue it fetches), so that
// the max_cost init writes can fire; "" for the others.
func InitModel(cli string) string { return backendFor(cli).InitModel }

// ReportsCost reports whether a CLI reports its own cost in USD (Claude
// Code's total_cost_usd, OpenCode's step cost): a max_cost can fire
// without a price for these.
func ReportsCost(cli string) bool { return backendFor(cli).ReportsCost }

// ReportsTokens reports whether a CLI reports tokens that a price can turn
// into a cost ("command" prints plain text: no tokens).
func ReportsTokens(cli string) bool { return backendFor(cli).ReportsTokens }
