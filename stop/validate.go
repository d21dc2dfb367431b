package stop

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/ralphloop/ralph/config"
)

// stopFields are the [[stop]] fields a kind may require or take.
var stopFields = []string{"max", "duration", "usd", "tokens", "count", "iterations", "cmd", "expect_exit",
	"must_match", "must_not_match", "rtfs", "json", "pattern", "regex", "path", "conditions"}

// fieldsSet says, of each of stopFields, whether s sets it (a number:
// other than zero; required fields must be positive, see missingField).
func fieldsSet(s *config.Stop) map[string]bool {
	return map[string]bool{
		"max": s.Max != 0, "duration": s.Duration.Duration != 0, "usd": s.USD != 0, "tokens": s.Tokens != 0,
		"count": s.Count != 0, "iterations": s.Iterations != 0, "cmd": len(s.Cmd) > 0, "expect_exit": s.ExpectExit != nil,
		"must_match": s.MustMatch != "", "must_not_match": s.MustNotMatch != "", "rtfs": s.RTFS != "", "json": s.JSON != "",
		"pattern": s.Pattern != "", "regex": s.Regex, "path": s.Path != "", "conditions": len(s.Conditions) > 0,
	}
}

// positive says, of each field a kind may require, whether s gives it a
// usable value: a number above zero, a non-empty string or list.
func positive(s *config.Stop) map[string]bool {
	return map[string]bool{
		"max": s.Max > 0, "duration": s.Duration.Duration > 0, "usd": s.USD > 0, "tokens": s.Tokens > 0,
		"count": s.Count > 0, "iterations": s.Iterations > 0, "cmd": len(s.Cmd) > 0, "pattern": s.Pattern != "",
		"path": s.Path != "", "conditions": len(s.Conditions) > 0,
	}
}

// checkFields checks table s against its kind's row: its required fields
// set, no field it does not take, and the fields every kind takes. The
// sentence is returned without its position (build adds it).
func checkFields(s *config.Stop, k *Kind) error {
	ok := positive(s)
	for _, f := range k.Required {
		if !ok[f] {
			return fmt.Errorf("kind %q needs a positive %s", s.Kind, f)
		}
	}
	set := fieldsSet(s)
	var extra []string
	for _, f := range slices.Sorted(maps.Keys(set)) {
		if set[f] && !slices.Contains(k.Required, f) && !slices.Contains(k.Optional, f) {
			extra = append(extra, f)
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("%s does not apply to kind %q and would be ignored; remove it", strings.Join(extra, ", "), s.Kind)
	}
	if s.ExpectExit != nil && (*s.ExpectExit < 0 || *s.ExpectExit > 255) {
		return fmt.Errorf("expect_exit %d is not an exit status; use 0 to 255", *s.ExpectExit)
	}
	if k.FixedClass != "" && s.Class != "" {
		return fmt.Errorf("%s %s; remove class %q", s.Kind, k.FixedClass, s.Class)
	}
	for _, c := range [][2]string{{"class", s.Class}, {"timeout_class", s.TimeoutClass}, {"error_class", s.ErrorClass}} {
		if err := checkClass(c[0], c[1]); err != nil {
			return err
		}
	}
	return nil
}

// checkClass checks a class field: class takes success, failure or limit;
// timeout_class and error_class also not_met.
func checkClass(what, v string) error {
	switch v {
	case "", string(ClassSuccess), string(ClassFailure), string(ClassLimit):
		return nil
	case "not_met":
		if what != "class" {
			return nil
		}
	}
	if what == "class" {
		return fmt.Errorf("class %q must be success, failure or limit", v)
	}
	return fmt.Errorf("%s %q must be not_met, success, failure or limit", what, v)
}

// compileRe compiles field's pattern; "" is an error when required.
func compileRe(field, pattern string, required bool) (*regexp.Regexp, error) {
	if pattern == "" {
		if required {
			return nil, fmt.Errorf("needs a %s", field)
		}
		return nil, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid regex: %v", field, err)
	}
	return re, nil
}
