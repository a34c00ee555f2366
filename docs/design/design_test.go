package design

import "testing"

func TestSchemasCompile(t *testing.T) {
	s, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Files()); got != 24 {
		t.Fatalf("compiled %d schemas, want 24: %v", got, s.Files())
	}
}
