package tools

import (
	"testing"

	"github.com/ocx-go/ocx/messages/toolio"
)

// TestWithFields: the friendly fields and dry_run are set over the JSON
// input, the other keys keeping their bytes; with nothing to set, or an
// input that is not one object without a key twice, the input goes to the
// tool as it came, for its strict reader to refuse.
func TestWithFields(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name, tool, raw string
		set             map[string]string
		dry             *bool
		want            string
	}{
		{"nothing set", toolio.ToolPost, `{"to": "x",  "to": "y"}`, nil, nil, `{"to": "x",  "to": "y"}`},
		{"blank", toolio.ToolPost, ``, map[string]string{"to": "abc", "text": "hi"}, &yes, `{"dry_run":true,"text":"hi","to":"abc"}`},
		{"over the input", toolio.ToolPost, `{"to": "old", "n": 1.50}`, map[string]string{"to": "new"}, &no, `{"dry_run":false,"n":1.50,"to":"new"}`},
		{"wall", toolio.ToolCreate, `{"budget": {"wall": "1h", "tokens": 3}}`, map[string]string{"wall": "2h", "objective": "o"}, nil, `{"budget":{"tokens":3,"wall":"2h"},"objective":"o"}`},
		{"wall, no budget", toolio.ToolCreate, `{}`, map[string]string{"wall": "2h"}, nil, `{"budget":{"wall":"2h"}}`},
		{"wall over a budget that is no object", toolio.ToolCreate, `{"budget": 7}`, map[string]string{"wall": "2h"}, nil, `{"budget":{"wall":"2h"}}`},
		{"not a tool's field", toolio.ToolPush, `{}`, map[string]string{"to": "x"}, &yes, `{"dry_run":true}`},
		{"a key twice", toolio.ToolPost, `{"to": "a", "to": "b"}`, nil, &yes, `{"to": "a", "to": "b"}`},
		{"not JSON", toolio.ToolPost, `{"to": `, map[string]string{"text": "x"}, &yes, `{"to": `},
		{"an array", toolio.ToolPost, `[1]`, nil, &yes, `[1]`},
		{"two objects", toolio.ToolPost, `{} {}`, nil, &yes, `{} {}`},
	} {
		if got := string(WithFields(c.tool, []byte(c.raw), c.set, c.dry)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	for _, tool := range Tools() {
		if ToolFields(tool.Name) == nil {
			t.Errorf("%s has no friendly fields listed (push lists none, but is listed)", tool.Name)
		}
	}
}
