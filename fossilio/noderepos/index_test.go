package noderepos

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// A write's backoffice on the server's node is the daemon's own hook
// work when it takes it (D96): the backoffice program is not run then.
// When it does not take it, or its work fails, the backoffice runs (here
// a fossil that is not there, so that its run shows as its error).
func TestBackofficeTriesTheOwnHookFirst(t *testing.T) {
	r := New(&messages.NodeConfig{}, nil)
	x := &Index{Project: "demo", Path: "/srv/demo.fossil"}
	missing := &fossilio.Fossil{Exe: filepath.Join(t.TempDir(), "no-fossil"), Home: t.TempDir()}
	ctx := context.Background()
	if err := r.Backoffice(x, missing)(ctx); err == nil || !strings.Contains(err.Error(), "backoffice") {
		t.Fatalf("with no own hook: %v; want the backoffice run (and failed)", err)
	}
	var asked []string
	own := func(done bool, err error) OwnHook {
		return func(_ context.Context, x *Index) (bool, error) {
			asked = append(asked, x.Path)
			return done, err
		}
	}
	for _, c := range []struct {
		name       string
		own        OwnHook
		backoffice bool
	}{
		{"taken", own(true, nil), false},
		{"not taken", own(false, nil), true},
		{"taken and failed", own(true, errors.New("the mark's lock")), true},
	} {
		asked = nil
		r.SetOwnHook(c.own)
		err := r.Backoffice(x, missing)(ctx)
		if ran := err != nil; ran != c.backoffice {
			t.Errorf("%s: the backoffice ran %v (%v), want %v", c.name, ran, err, c.backoffice)
		}
		if len(asked) != 1 || asked[0] != x.Path {
			t.Errorf("%s: the own hook was asked for %q, want once for %s", c.name, asked, x.Path)
		}
	}
}
