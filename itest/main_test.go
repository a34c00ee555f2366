// Package itest holds OCX's end-to-end tests: the real ocx, ocxd and
// workspace binaries, built once into a release directory, against a real
// fossil server on 127.0.0.1, with real processes, pipes and bwrap.
package itest

import (
	"fmt"
	"github.com/ocx-go/ocx/host"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// relRoot is the release root the tests' node uses: releases/test/ holds
// the three binaries, and current links to it (contracts 11).
var relRoot string

// buildErrs says why a binary of the release did not build.
var buildErrs = map[string]string{}

// needs fails the test when a binary it runs did not build.
func needs(tb testing.TB, names ...string) {
	tb.Helper()
	for _, name := range names {
		if msg, bad := buildErrs[name]; bad {
			tb.Fatalf("the release lacks %s, which did not build: %s", name, msg)
		}
	}
}

// release is the release directory itself.
func release() string { return filepath.Join(relRoot, "releases", "test") }

// llmRoot is a release root like relRoot whose release holds the real
// runners (ocx-runner-native built from this tree, not the stand-in), for
// the tests of llm sessions against a stand-in model server.
var llmRoot string

// makeLLMRelease makes llmRoot at dir: the test release's programs, linked,
// and the runners built.
func makeLLMRelease(dir string) error {
	rel := filepath.Join(dir, "releases", "llm")
	if err := os.MkdirAll(rel, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"ocx", "ocxd", "workspace", host.HookProgram, host.ConsoleProgram} {
		if _, bad := buildErrs[name]; bad {
			continue
		}
		if err := os.Link(filepath.Join(release(), name), filepath.Join(rel, name)); err != nil {
			return err
		}
	}
	for _, name := range []string{"ocx-runner-native", "ocx-runner-claude", "ocx-runner-codex"} {
		build := exec.Command("go", "build", "-o", filepath.Join(rel, name), "github.com/ocx-go/ocx/cmd/"+name)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErrs["llm "+name] = fmt.Sprintf("%v: %s", err, out)
		}
	}
	llmRoot = dir
	return os.Symlink(filepath.Join("releases", "llm"), filepath.Join(dir, "current"))
}

// peakRSS is testdata/peakrss, built.
var peakRSS string

// program is the path of one of the release's binaries.
func program(name string) string { return filepath.Join(relRoot, "current", name) }

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "itest:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "ocx-itest-release-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	relRoot = dir
	if err := os.MkdirAll(release(), 0o755); err != nil {
		return 0, err
	}
	// Each binary is built on its own, so that one that does not build
	// fails the tests that need it (needs), not the others.
	for _, name := range []string{"ocx", "ocxd", "workspace", host.HookProgram, host.ConsoleProgram} {
		build := exec.Command("go", "build", "-o", filepath.Join(release(), name), "github.com/ocx-go/ocx/cmd/"+name)
		// Static binaries start faster (no dynamic loader), and a session's
		// sandbox needs no shared library for them.
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErrs[name] = fmt.Sprintf("%v: %s", err, out)
		}
	}
	if msg, bad := buildErrs["ocx"]; bad {
		return 0, fmt.Errorf("build ocx: %s", msg)
	}
	// The measure of a command's peak memory (testdata/peakrss).
	peakRSS = filepath.Join(dir, "peakrss")
	if out, err := exec.Command("go", "build", "-o", peakRSS, "./testdata/peakrss").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build peakrss: %v: %s", err, out)
	}
	// The stand-in runner of an llm session (D9), answering at once.
	runner, err := os.ReadFile(filepath.Join("..", "cmd", "internal", "session", "testdata", "ocx-runner-native"))
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(release(), "ocx-runner-native"), runner, 0o755); err != nil {
		return 0, err
	}
	if err := os.Symlink(filepath.Join("releases", "test"), filepath.Join(relRoot, "current")); err != nil {
		return 0, err
	}
	if err := makeLLMRelease(filepath.Join(dir, "llm")); err != nil {
		return 0, err
	}
	// goleak checks after the tests, before the release is removed.
	var code int
	func() {
		defer func() {
			if r := recover(); r != nil {
				code = 1
				fmt.Fprintln(os.Stderr, "itest: panic:", r)
			}
		}()
		code = m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "itest: goroutines leaked:", err)
			code = 1
		}
	}
	return code, nil
}
