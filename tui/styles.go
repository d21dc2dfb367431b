package tui

import (
	"io"
	"os"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// styles are every style the UI draws with, made from one renderer so that
// the colour profile (and NO_COLOR) is decided once, for the output the UI
// writes to. Under the ASCII profile every style renders as plain text, so
// nothing the UI says may depend on colour alone: markers (✓ ✗ ⟳ ›) carry
// the meaning and colour repeats it.
type styles struct {
	profile termenv.Profile
	r       *lipgloss.Renderer

	border, borderFocus, title, titleFocus lipgloss.Style

	dim, text, bold, accent       lipgloss.Style
	ok, fail, running, warn, info lipgloss.Style
	selected                      lipgloss.Style

	header                                       lipgloss.Style
	stateRun, statePause, stateOK, stateFail     lipgloss.Style
	stateLimit, stateIdle                        lipgloss.Style
	helpKey, helpDesc, helpSep                   lipgloss.Style
	synParen, synSpecial, synString, synKeyword  lipgloss.Style
	synNumber, synConst, synComment, synSymbol   lipgloss.Style
	barFull, barEmpty, barClosest, barMet        string // colours for bubbles/progress
	barFail, barLimit                            string
	logDebug, logInfo, logWarn, logError         lipgloss.Style
	statusPrompt, statusAlert, statusOK, statusN lipgloss.Style

	pieces map[edgeKey]string // drawn border pieces (see memo)
}

// profileFor is the colour profile for out: what the terminal supports,
// ASCII when NO_COLOR is set (https://no-color.org) or out is not a
// terminal.
func profileFor(out io.Writer) termenv.Profile {
	if _, ok := os.LookupEnv("NO_COLOR"); ok {
		return termenv.Ascii
	}
	return termenv.NewOutput(out).EnvColorProfile()
}

// The palette follows crush: a violet accent on neutral greys, green, red
// and amber for outcomes.
const (
	violet = lipgloss.Color("#8B75F9")
	grey   = lipgloss.Color("#6B6B6B")
	light  = lipgloss.Color("#BFBCC8")
	green  = lipgloss.Color("#4FD18B")
	red    = lipgloss.Color("#F0667A")
	amber  = lipgloss.Color("#E8B44C")
	blue   = lipgloss.Color("#6CB6FF")
	pink   = lipgloss.Color("#F28FCB")
)

// newStyles draws with the palette in profile's colours (none for ASCII)
// on out.
func newStyles(out io.Writer, profile termenv.Profile) *styles {
	r := lipgloss.NewRenderer(out)
	r.SetColorProfile(profile)
	n := r.NewStyle
	s := &styles{profile: profile, r: r, pieces: map[edgeKey]string{}}
	s.border = n().Foreground(grey)
	s.borderFocus = n().Foreground(violet)
	s.title = n().Foreground(light)
	s.titleFocus = n().Foreground(violet).Bold(true)
	s.dim = n().Foreground(grey)
	s.text = n()
	s.bold = n().Bold(true)
	s.accent = n().Foreground(violet).Bold(true)
	s.ok = n().Foreground(green)
	s.fail = n().Foreground(red)
	s.running = n().Foreground(amber)
	s.warn = n().Foreground(amber)
	s.info = n().Foreground(blue)
	s.selected = n().Background(lipgloss.Color("#3A3450")).Bold(true)
	s.header = n().Foreground(light)
	s.stateRun = n().Foreground(lipgloss.Color("#101010")).Background(green).Bold(true)
	s.statePause = n().Foreground(lipgloss.Color("#101010")).Background(amber).Bold(true)
	s.stateOK = n().Foreground(lipgloss.Color("#101010")).Background(green).Bold(true)
	s.stateFail = n().Foreground(lipgloss.Color("#101010")).Background(red).Bold(true)
	s.stateLimit = n().Foreground(lipgloss.Color("#101010")).Background(blue).Bold(true)
	s.stateIdle = n().Foreground(lipgloss.Color("#101010")).Background(grey).Bold(true)
	s.helpKey = n().Foreground(light)
	s.helpDesc = n().Foreground(grey)
	s.helpSep = n().Foreground(lipgloss.Color("#4A4A4A"))
	s.synParen = n().Foreground(grey)
	s.synSpecial = n().Foreground(violet).Bold(true)
	s.synString = n().Foreground(green)
	s.synKeyword = n().Foreground(pink)
	s.synNumber = n().Foreground(amber)
	s.synConst = n().Foreground(blue)
	s.synComment = n().Foreground(grey).Italic(true)
	s.synSymbol = n()
	s.barFull, s.barEmpty, s.barClosest, s.barMet = "#6CB6FF", "#4A4A4A", "#8B75F9", "#4FD18B"
	s.barFail, s.barLimit = "#F0667A", "#E8B44C"
	s.logDebug = n().Foreground(grey)
	s.logInfo = n().Foreground(blue)
	s.logWarn = n().Foreground(amber)
	s.logError = n().Foreground(red).Bold(true)
	s.statusPrompt = n().Foreground(violet).Bold(true)
	s.statusAlert = n().Foreground(amber).Bold(true)
	s.statusOK = n().Foreground(green).Bold(true)
	s.statusN = n().Foreground(light)
	return s
}

// color reports whether styles draw colours at all.
func (s *styles) color() bool { return s.profile != termenv.Ascii }
