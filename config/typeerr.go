package config

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// typeErrRe matches the decoder's message for a value of the wrong type,
// which it returns as a plain error rather than a ParseError.
var typeErrRe = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "([^"]*)"\): (?:incompatible types: TOML value has type (.+); destination has type (.+)|type mismatch for (\S+): expected (table) but found (.+))$`)

// typeError turns the decoder's "incompatible types" error into one
// sentence naming the key, the type it needs and the type it got, or
// returns nil for any other error.
func (c *Config) typeError(file string, err error) error {
	return typeErrorIn(reflect.TypeOf(Config{}), c.lines, file, err)
}

// typeErrorIn is typeError for a file decoded into a value of type root,
// whose keys' lines lines indexes (nil: none).
func typeErrorIn(root reflect.Type, lines *lineIndex, file string, err error) error {
	m := typeErrRe.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	key, got, dst := m[2], m[3], m[4]
	if m[6] != "" { // a table was expected
		got, dst = m[7], m[6]
	}
	got = tomlTypeName(got)
	line, _ := strconv.Atoi(m[1])
	if line == 0 && lines != nil {
		line = lines.findPath(key)
	}
	ft := fieldType(root, strings.Split(key, "."))
	want := goTypeName(ft)
	if want == "" {
		want = "a " + dst
	}
	msg := key + " must be " + want + ", not " + got
	if ft != nil && ft.Kind() == reflect.Slice && dst != "slice" { // the list is fine, one item is not
		msg = key + " must be " + want + "; one of its items is " + got
	}
	return &Error{File: file, Line: line, Msg: msg}
}

// fieldType follows a dotted key through the toml tags of t, or returns nil.
func fieldType(t reflect.Type, path []string) reflect.Type {
	for _, name := range path {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		var next reflect.Type
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); strings.Split(f.Tag.Get("toml"), ",")[0] == name {
				next = f.Type
				break
			}
		}
		if next == nil {
			return nil
		}
		t = next
	}
	return t
}

var durationType = reflect.TypeOf(Duration{})

// goTypeName says what a value of a config field looks like in TOML.
func goTypeName(t reflect.Type) string {
	if t == nil {
		return ""
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType {
		return `a duration string such as "30s"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "a table"
	case reflect.Slice:
		switch e := t.Elem(); {
		case e.Kind() == reflect.String:
			return `a list of strings, such as ["a", "b"]`
		case e.Kind() == reflect.Struct:
			return "a list of tables"
		}
	}
	return ""
}

// tomlTypeName names a TOML value by the Go type the decoder reports for
// it, or by its MetaData.Type name.
func tomlTypeName(goType string) string {
	switch {
	case goType == "string", goType == "String":
		return "a string"
	case goType == "int64", goType == "Integer":
		return "an integer"
	case goType == "float64", goType == "Float":
		return "a number"
	case goType == "bool", goType == "Bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"), goType == "Array", goType == "ArrayHash":
		return "a list"
	case strings.HasPrefix(goType, "map["), goType == "Hash":
		return "a table"
	case strings.Contains(goType, "time.") || strings.Contains(goType, "toml.Local"), strings.Contains(goType, "Datetime"), goType == "Date", goType == "Time":
		return "a date or time"
	}
	return "a " + goType
}
