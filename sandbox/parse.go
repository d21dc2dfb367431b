package sandbox

import "fmt"

// ParseNetwork reads [sandbox] network; "" is NetModel, the default.
func ParseNetwork(s string) (Network, error) {
	switch n := Network(s); n {
	case "":
		return NetModel, nil
	case NetModel, NetNone, NetAll:
		return n, nil
	}
	return "", fmt.Errorf("sandbox network %q is not one of model, none or all", s)
}
