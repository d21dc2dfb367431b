package assemble

// ConfigError is an error of the config, or of the plan, prompt or
// provider it names: the run cannot be built as configured. Its text is
// the sentence to show the user.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// configError marks err as the config's, keeping nil nil.
func configError(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigError{Err: err}
}
