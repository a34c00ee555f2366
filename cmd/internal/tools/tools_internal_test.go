package tools

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/fossilio"
)

// TestHashRefusalNamesTheField: an ambiguous prefix is refused naming the
// field and every match; an unknown one naming the field and the project.
func TestHashRefusalNamesTheField(t *testing.T) {
	amb := &fossilio.HashError{Op: "resolve", Hash: "abcdef0123", Matches: []string{"abcdef0123aa", "abcdef0123bb"}, Err: fossilio.ErrAmbiguous}
	for _, c := range []struct {
		err  error
		want []string
	}{
		{amb, []string{"to: ", `"abcdef0123" names several artifacts`, "abcdef0123aa, abcdef0123bb", "more of its digits"}},
		{&fossilio.HashError{Hash: "abcdef0123", Err: fossilio.ErrNotFound}, []string{"to: ", "names no artifact of demo"}},
		{errors.New("disk"), []string{"to: disk"}},
	} {
		got := node.HashRefusal("to", "abcdef0123", "demo", c.err).Error()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q does not say %q", got, w)
			}
		}
	}
}
