//go:build !linux

package sandbox

import "errors"

func landlockABI() int { return 0 }

func landlockUsable(Network) error { return errors.New("Landlock is Linux's") }

func landlockNetUsable() error { return landlockUsable(NetModel) }

type ruleset struct {
	abi   int
	fs    bool
	rules []rule
	tcp   bool
	ports []uint16
}

func (r ruleset) confine() error { return errors.New("sandbox: Landlock is Linux's") }
