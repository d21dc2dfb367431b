package notify

// What the external tests (package notify_test, which may import
// assemble, the package that builds runs and imports notify) share with
// the internal ones.
var (
	NeverAnswers  = neverAnswers
	SinkCfg       = sinkCfg
	DiscardLogger = discardLogger
	Register      = register
	Unregister    = unregister
	Undocumented  = undocumented
)
