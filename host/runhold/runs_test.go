package runhold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `ocx attach RUN` finds the socket of the one run in care RUN begins.
func TestRunSocket(t *testing.T) {
	dir := t.TempDir()
	a := strings.Repeat("ab", 32)
	b := "abcd" + strings.Repeat("0", 60)
	for _, h := range []string{a, b} {
		if err := os.WriteFile(filepath.Join(dir, h+".json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := RunSocket(dir, "abab"); err != nil || s != filepath.Join(dir, a[:16]+".sock") {
		t.Errorf("abab: %q %v", s, err)
	}
	if _, err := RunSocket(dir, "ab"); err == nil || !strings.Contains(err.Error(), "2 runs") {
		t.Errorf("ab: %v", err)
	}
	if _, err := RunSocket(dir, "ff"); err == nil {
		t.Error("ff: no error")
	}
	if _, err := RunSocket(dir, "../x"); err == nil {
		t.Error("../x: no error")
	}
}
