package validate

import (
	"testing"

	"github.com/ocx-go/ocx/docs/design"
)

func TestSchemasCompile(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Files()); got != 26 {
		t.Fatalf("compiled %d schemas, want 26: %v", got, s.Files())
	}
}

// The examples the docs and the tests share are messages their schemas
// accept.
func TestExamplesValidate(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"run-echo.json", "run-claude.json"} {
		if err := s.ValidateMessage([]byte(design.Example(name))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
