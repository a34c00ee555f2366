package fossilio

import "testing"

func TestHookSubst(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"'/rel/ocx' hook --agents '/a' --repo %R", "'/rel/ocx' hook --agents '/a' --repo /srv/demo.fossil"},
		{"%F backoffice %R", "/usr/bin/fossil backoffice /srv/demo.fossil"},
		{"cat %A > /dev/null", "cat  > /dev/null"},
		{"100% %x %%R", "100% %x %/srv/demo.fossil"},
		{"ends in %", "ends in %"},
		{"", ""},
	} {
		if got := HookSubst(c.cmd, "/usr/bin/fossil", "/srv/demo.fossil"); got != c.want {
			t.Errorf("HookSubst(%q) = %q; want %q", c.cmd, got, c.want)
		}
	}
}

func TestOCXHookIn(t *testing.T) {
	for _, c := range []struct {
		raw    string
		cmd    string
		others int
		ok     bool
	}{
		{``, "", 0, false},
		{`[]`, "", 0, false},
		{`not json`, "", 0, false},
		{`{"cmd":"x","ocx":1}`, "", 0, false},
		{`[{"type":"after-receive","cmd":"mirror %R","seq":10}]`, "", 1, false},
		{`[{"type":"after-receive","cmd":"mirror","seq":10},{"type":"after-receive","cmd":"ocx hook --repo %R","seq":50,"ocx":1}]`, "ocx hook --repo %R", 1, true},
	} {
		cmd, others, ok := ocxHookIn(c.raw)
		if cmd != c.cmd || others != c.others || ok != c.ok {
			t.Errorf("ocxHookIn(%q) = %q, %d, %v; want %q, %d, %v", c.raw, cmd, others, ok, c.cmd, c.others, c.ok)
		}
	}
}
