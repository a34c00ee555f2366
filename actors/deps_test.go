package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/protocol"
)

// TestNoHostImports keeps the actors and their vocabulary pure. Neither
// actors nor messages and its packages, nor any package of this module
// they depend on, may import os/exec, syscall or golang.org/x/sys/unix,
// and the real host package must not be among their dependencies at all:
// the actors reach the operating system only through the interfaces of
// deps.go, wired in cmd/ocxd. (The
// standard library and protoactor use syscall themselves, so the rule is on
// our own packages' imports.) Only protoactor's actor package is used, never
// its remote or cluster packages.
func TestNoHostImports(t *testing.T) {
	const module = "github.com/ocx-go/ocx/"
	bannedImports := []string{"os/exec", "syscall", "golang.org/x/sys/unix", module + "host/unixhost"}
	bannedDeps := []string{module + "host/unixhost", "github.com/asynkron/protoactor-go/remote", "github.com/asynkron/protoactor-go/cluster"}
	for _, pkg := range []string{module + "actors", module + "messages/..."} {
		cmd := exec.Command("go", "list", "-deps", "-json", pkg)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps -json %s: %v\n%s", pkg, err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		ours := 0
		for {
			var p struct {
				ImportPath string
				Imports    []string
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("go list output: %v", err)
			}
			for _, b := range bannedDeps {
				if p.ImportPath == b || strings.HasPrefix(p.ImportPath, b+"/") {
					t.Errorf("%s depends on %s", pkg, p.ImportPath)
				}
			}
			if !strings.HasPrefix(p.ImportPath, module) {
				continue
			}
			ours++
			for _, imp := range p.Imports {
				for _, b := range bannedImports {
					if imp == b {
						t.Errorf("%s (a dependency of %s) imports %s; the actors reach the host only through their interfaces", p.ImportPath, pkg, imp)
					}
				}
			}
		}
		if ours == 0 {
			t.Fatalf("go list -deps %s listed none of this module's packages; the check saw nothing", pkg)
		}
	}
}

// TestDepsAnswerAsTheEffectSays: the result each asking effect gets from
// the deps is the type its Answer names, so the hand-off's count of
// outstanding effects pairs each with its result on the type itself.
func TestDepsAnswerAsTheEffectSays(t *testing.T) {
	f := newFakeWorld()
	d := f.deps()
	d.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l := testLaunch(1, false)
	for _, e := range []protocol.Asking{
		protocol.ClassifyArtifact{Repository: "/srv/demo.fossil", Hash: testHash(1)},
		protocol.ResolveLaunch{Proc: protocol.ProcInfo{Proc: protocol.ProcID{PID: 9, Start: 9}, Workspace: testW, Launch: l.Hash}},
		protocol.WriteRefusal{Launch: l, Reason: "r"},
		protocol.WriteEnd{Launch: l, Proc: protocol.ProcID{PID: 9, Start: 9}},
		protocol.ReadResult{Proc: protocol.ProcID{PID: 9, Start: 9}, Launch: l},
		protocol.FindUntested{Branch: "trunk"},
		protocol.WriteLaunch{Branch: "trunk", Checkin: testHash(2)},
		protocol.ScanWorkspace{Workspace: testW},
		protocol.SpawnSession{Launch: l},
		protocol.SignalProcess{Proc: protocol.ProcID{PID: 9, Start: 9}, Signal: protocol.SigTERM},
		protocol.PauseInputs{},
		protocol.ResumeInputs{},
	} {
		got := d.run(context.Background(), e)
		if reflect.TypeOf(got) != reflect.TypeOf(e.Answer()) {
			t.Errorf("%T is answered with %T, but says %T", e, got, e.Answer())
		}
	}
}
