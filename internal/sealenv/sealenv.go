package sealenv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// sealedFDEnv names the descriptor on which a ralph started by ralph (a
// re-executed self, a detached run) reads the secret variables handed
// over to it, instead of finding them in its initial environment, which
// /proc/<pid>/environ shows for the whole life of the process.
const sealedFDEnv = "RALPH_SEALED_FD"

// maxSealed bounds what is handed over: a pipe holds 64 KiB before a
// writer with no reader yet would block.
const maxSealed = 60 << 10

// isSecretName reports whether an environment variable's name looks like
// it holds a credential: a model's API key (OPENAI_API_KEY, and any
// api_key_env named *_KEY), a token, a secret, a password.
func isSecretName(name string) bool {
	n := strings.ToUpper(name)
	for _, suffix := range []string{"_KEY", "_APIKEY", "_TOKEN", "_SECRET", "_PASSWORD", "_PASSWD", "_CREDENTIALS"} {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return n == "API_KEY" || n == "TOKEN" || n == "SECRET" || n == "PASSWORD"
}

// splitSecrets separates env ("NAME=value" entries) into the variables
// with a secret-looking name and the rest; a handed-over descriptor of an
// earlier hand-over is dropped.
func splitSecrets(env []string) (secret, rest []string) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == sealedFDEnv:
		case isSecretName(name):
			secret = append(secret, kv)
		default:
			rest = append(rest, kv)
		}
	}
	return secret, rest
}

// sealPipe returns the read end of a pipe that holds secret, NUL-separated,
// for a process ralph starts to inherit. ok is false, with nothing open,
// when there is nothing to hand over or too much for a pipe.
func sealPipe(secret []string) (r *os.File, ok bool, err error) {
	data := []byte(strings.Join(secret, "\x00"))
	if len(secret) == 0 || len(data) > maxSealed {
		return nil, false, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, false, err
	}
	defer w.Close()
	if _, err := w.Write(data); err != nil {
		r.Close()
		return nil, false, err
	}
	return r, true, nil
}

// HandOver starts cmd (a ralph) without the secret variables of its
// environment in its environment: they reach it on an inherited pipe,
// which its Hide reads. Call it before cmd.Start; close the returned file
// after.
func HandOver(cmd *exec.Cmd) (io.Closer, error) {
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	secret, rest := splitSecrets(env)
	r, ok, err := sealPipe(secret)
	if err != nil {
		return nil, fmt.Errorf("hand the environment's secrets to the background run: %w", err)
	}
	if !ok {
		cmd.Env = env
		return io.NopCloser(nil), nil
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	cmd.Env = append(rest, sealedFDEnv+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	return r, nil
}

// readSealed reads the variables handed over on the descriptor that
// RALPH_SEALED_FD names, if any (handed), into this process's environment
// as Go sees it (os.Getenv, and the environment of the processes it
// starts); the process's initial environment, which /proc shows, never
// held them.
func readSealed() (handed bool, err error) {
	v, ok := os.LookupEnv(sealedFDEnv)
	if !ok {
		return false, nil
	}
	os.Unsetenv(sealedFDEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return true, fmt.Errorf("%s=%q is not a file descriptor ralph handed over", sealedFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "sealed environment")
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSealed+1))
	if err != nil {
		return true, fmt.Errorf("read the environment handed over on descriptor %d: %w", fd, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if name, value, ok := strings.Cut(string(kv), "="); ok && name != "" {
			os.Setenv(name, value)
		}
	}
	return true, nil
}
