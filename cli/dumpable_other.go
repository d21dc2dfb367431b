//go:build !linux

package cli

func hideEnvironment() {}
