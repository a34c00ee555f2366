package messages

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func genNodeConfig() *rapid.Generator[*NodeConfig] {
	return rapid.Custom(func(t *rapid.T) *NodeConfig {
		c := &NodeConfig{
			User:     genLogin().Draw(t, "user"),
			Release:  genOpt(genPath()).Draw(t, "release"),
			Projects: map[string]NodeProject{},
		}
		for _, name := range rapid.SliceOfNDistinct(genName(), 1, 4, rapid.ID[string]).Draw(t, "projects") {
			p := NodeProject{
				Repository: "/srv/fossil/" + name + repositorySuffix,
				URL:        rapid.SampledFrom([]string{"http://127.0.0.1:", "https://fossil.example.org:", "http://[::1]:"}).Draw(t, "base") + rapid.StringMatching(`[1-9][0-9]{1,4}`).Draw(t, "port") + "/" + name,
				OtherHost:  rapid.Bool().Draw(t, "other_host"),
			}
			if !p.OtherHost {
				for _, u := range rapid.SliceOfNDistinct(genLogin(), 0, 3, rapid.ID[string]).Draw(t, "remote_nodes") {
					if u == c.User {
						continue
					}
					r := RemoteNode{User: u, Poke: genOpt(rapid.SampledFrom([]string{"http://127.0.0.1:8091/", "https://10.0.0.2:9/poke", "http://localhost:8091/"})).Draw(t, "poke")}
					if r.Poke != "" {
						r.PokeSecret = genSecret().Draw(t, "poke_secret")
					}
					p.RemoteNodes = append(p.RemoteNodes, r)
				}
			}
			c.Projects[name] = p
		}
		if rapid.Bool().Draw(t, "pull") {
			c.Pull = &NodePull{Every: rapid.SampledFrom([]string{"", "2s", "100ms", "1h"}).Draw(t, "every"),
				Listen: rapid.SampledFrom([]string{"", "127.0.0.1:8091", "[::1]:9"}).Draw(t, "listen")}
			if c.Pull.Listen != "" {
				c.Pull.Secret = genSecret().Draw(t, "secret")
			}
		}
		if rapid.Bool().Draw(t, "limits") {
			l := &NodeSessionLimits{Memory: rapid.SampledFrom([]string{"", "16M", "2G", "1073741824"}).Draw(t, "memory")}
			if rapid.Bool().Draw(t, "processes") {
				n := rapid.Uint64Range(minSessionProcesses, 1<<20).Draw(t, "n")
				l.Processes = &n
			}
			c.SessionLimits = l
		}
		return c
	})
}

// genSecret draws a poke's secret.
func genSecret() *rapid.Generator[string] {
	return rapid.StringMatching(`[0-9a-zA-Z._~+/=-]{32,80}`)
}

func genBinding() *rapid.Generator[*Binding] {
	return rapid.Custom(func(t *rapid.T) *Binding {
		return &Binding{
			Login:       genLogin().Draw(t, "login"),
			Project:     genName().Draw(t, "project"),
			ProjectCode: genHash().Draw(t, "code"),
			Remote:      "http://127.0.0.1:8080/",
			Branch:      genBranch().Draw(t, "branch"),
			Home:        genHash().Draw(t, "home"),
			Workspace:   genHash().Draw(t, "workspace"),
		}
	})
}

func TestHostFilesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genNodeConfig().Draw(t, "node")
		data, err := c.Encode()
		if err != nil {
			t.Fatalf("encode %s: %v", c, err)
		}
		got, err := DecodeNodeConfig(data)
		if err != nil {
			t.Fatalf("decode %s: %v\n%s", c, err, data)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip:\n got %s\nwant %s", got, c)
		}
		b := genBinding().Draw(t, "binding")
		data, err = b.Encode()
		if err != nil {
			t.Fatalf("encode %s: %v", b, err)
		}
		gotB, err := DecodeBinding(data)
		if err != nil {
			t.Fatalf("decode %s: %v\n%s", b, err, data)
		}
		if !reflect.DeepEqual(gotB, b) {
			t.Fatalf("round trip:\n got %s\nwant %s", gotB, b)
		}
	})
}

func TestHostFilesHostile(t *testing.T) {
	const code = "96a1f28a1bc4b1c9e1a5e57c3f4b00bf5fcb3a23"
	good := `{"ocx":"binding","login":"alice","project":"demo","project_code":"` + code + `","remote":"http://127.0.0.1:8080/","branch":"trunk","home":"` + code + `","workspace":"` + code + `"}`
	if _, err := DecodeBinding([]byte(good)); err != nil {
		t.Fatalf("the good binding is refused: %v", err)
	}
	for _, c := range []struct {
		name, data, field string
		want              error
	}{
		{"login ../x", strings.Replace(good, `"alice"`, `"../x"`, 1), "login", strictjson.ErrInvalid},
		{"password in remote", strings.Replace(good, `http://127.0.0.1`, `http://a:pw@127.0.0.1`, 1), "remote", strictjson.ErrInvalid},
		{"file remote", strings.Replace(good, `http://127.0.0.1:8080/`, `file:///srv/x`, 1), "remote", strictjson.ErrInvalid},
		{"duplicate key", strings.Replace(good, `"branch":"trunk"`, `"branch":"trunk","branch":"x"`, 1), "branch", strictjson.ErrDuplicateKey},
		{"wrong kind", strings.Replace(good, `"ocx":"binding"`, `"ocx":"node"`, 1), "ocx", strictjson.ErrWrongKind},
		{"unknown version", strings.Replace(good, `"ocx":"binding"`, `"ocx":"binding","version":2`, 1), "version", strictjson.ErrUnknownVersion},
		{"short home", strings.Replace(good, `"home":"`+code, `"home":"abc`, 1), "home", strictjson.ErrInvalid},
		{"missing workspace", strings.Replace(good, `,"workspace":"`+code+`"`, ``, 1), "workspace", strictjson.ErrMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeBinding([]byte(c.data))
			var fe *strictjson.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, c.want) || fe.Field != c.field {
				t.Fatalf("got %v; want a %v naming field %q", err, c.want, c.field)
			}
		})
	}
	node := `{"ocx":"node","user":"ocx","projects":{"demo":{"repository":"/srv/demo.fossil","url":"http://127.0.0.1:8080/"}}}`
	if _, err := DecodeNodeConfig([]byte(node)); err != nil {
		t.Fatalf("the good node.json is refused: %v", err)
	}
	const secret = "0123456789abcdef0123456789abcdef"
	for _, good := range []string{
		strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"https://fossil.example.org/","other_host":true`, 1),
		strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://localhost:8080/","other_host":true`, 1),
		strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"https://lab-1.example.org/","poke_secret":"`+secret+`"}]`, 1),
		strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"listen":"10.0.0.2:8091","secret":"`+secret+`"}`, 1),
	} {
		if _, err := DecodeNodeConfig([]byte(good)); err != nil {
			t.Errorf("a good node.json is refused: %v\n%s", err, good)
		}
	}
	for _, c := range []struct {
		name, data, field string
		want              error
	}{
		{"project not its file", strings.Replace(node, `/srv/demo.fossil`, `/srv/other.fossil`, 1), "projects.demo.repository", strictjson.ErrInvalid},
		{"relative release", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","release":"rel"`, 1), "release", strictjson.ErrInvalid},
		{"no projects", `{"ocx":"node","user":"ocx","projects":{}}`, "projects", strictjson.ErrMissing},
		{"node user nobody", strings.Replace(node, `"user":"ocx"`, `"user":"nobody"`, 1), "user", strictjson.ErrInvalid},
		{"session memory not a size", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","session_limits":{"memory":"lots"}`, 1), "session_limits.memory", strictjson.ErrInvalid},
		{"session memory too small", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","session_limits":{"memory":"1M"}`, 1), "session_limits.memory", strictjson.ErrInvalid},
		{"session memory a number", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","session_limits":{"memory":1048576000}`, 1), "session_limits.memory", strictjson.ErrInvalid},
		{"session processes too few", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","session_limits":{"processes":2}`, 1), "session_limits.processes", strictjson.ErrInvalid},
		{"session limit unknown", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","session_limits":{"cpu":5}`, 1), "session_limits.cpu", strictjson.ErrUnknownKey},
		{"pull every not a duration", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"every":"often"}`, 1), "pull.every", strictjson.ErrInvalid},
		{"pull every too short", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"every":"1ms"}`, 1), "pull.every", strictjson.ErrInvalid},
		{"pull listen a name", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"listen":"localhost:8091"}`, 1), "pull.listen", strictjson.ErrInvalid},
		{"pull listen no port", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"listen":"127.0.0.1"}`, 1), "pull.listen", strictjson.ErrInvalid},
		{"pull key unknown", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"interval":"2s"}`, 1), "pull.interval", strictjson.ErrUnknownKey},
		{"remote node ../x", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"../x"}]`, 1), "projects.demo.remote_nodes[0].user", strictjson.ErrInvalid},
		{"remote node the node's own", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"ocx"}]`, 1), "projects.demo.remote_nodes[0].user", strictjson.ErrInvalid},
		{"remote node twice", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1"},{"user":"lab-1"}]`, 1), "projects.demo.remote_nodes[1].user", strictjson.ErrInvalid},
		{"remote node poke not a URL", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"ftp://x/","poke_secret":"`+secret+`"}]`, 1), "projects.demo.remote_nodes[0].poke", strictjson.ErrInvalid},
		{"remote node poke in clear", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"http://10.0.0.2:8091/","poke_secret":"`+secret+`"}]`, 1), "projects.demo.remote_nodes[0].poke", strictjson.ErrInvalid},
		{"remote node poke without a secret", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"https://lab-1.example.org/"}]`, 1), "projects.demo.remote_nodes[0].poke_secret", strictjson.ErrMissing},
		{"remote node secret without a poke", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke_secret":"`+secret+`"}]`, 1), "projects.demo.remote_nodes[0].poke_secret", strictjson.ErrInvalid},
		{"remote node secret too short", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"https://lab-1.example.org/","poke_secret":"short"}]`, 1), "projects.demo.remote_nodes[0].poke_secret", strictjson.ErrInvalid},
		{"remote node key unknown", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"https://lab-1.example.org/","poke_secrt":"`+secret+`"}]`, 1), "projects.demo.remote_nodes[0].poke_secrt", strictjson.ErrUnknownKey},
		{"remote node secret a number", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"https://lab-1.example.org/","poke_secret":12}]`, 1), "projects.demo.remote_nodes[0].poke_secret", strictjson.ErrInvalid},
		{"pull listen without a secret", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"listen":"127.0.0.1:8091"}`, 1), "pull.secret", strictjson.ErrMissing},
		{"pull secret without listen", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"secret":"`+secret+`"}`, 1), "pull.secret", strictjson.ErrInvalid},
		{"pull secret with a space", strings.Replace(node, `"user":"ocx"`, `"user":"ocx","pull":{"listen":"127.0.0.1:8091","secret":"`+secret+` x"}`, 1), "pull.secret", strictjson.ErrInvalid},
		{"a server on another host in clear", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://fossil.example.org/","other_host":true`, 1), "projects.demo.url", strictjson.ErrInvalid},
		{"remote nodes on another host", strings.Replace(node, `"url":"http://127.0.0.1:8080/"`, `"url":"http://127.0.0.1:8080/","other_host":true,"remote_nodes":[{"user":"lab-1"}]`, 1), "projects.demo.remote_nodes", strictjson.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeNodeConfig([]byte(c.data))
			var fe *strictjson.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, c.want) || fe.Field != c.field {
				t.Fatalf("got %v; want a %v naming field %q", err, c.want, c.field)
			}
		})
	}
}

func FuzzDecodeHostFiles(f *testing.F) {
	f.Add([]byte(`{"ocx":"node","user":"ocx","projects":{"demo":{"repository":"/srv/demo.fossil","url":"http://127.0.0.1:8080/"}}}`))
	f.Add([]byte(`{"ocx":"binding","login":"a","project":"p","project_code":"","remote":"","branch":"","home":"","workspace":""}`))
	f.Add([]byte(`{"ocx":"binding","ocx":"node"}`))
	f.Add([]byte(`{"ocx":"node","user":"ocx","pull":{"listen":"127.0.0.1:8091","secret":"0123456789abcdef0123456789abcdef"},"projects":{"demo":{"repository":"/srv/demo.fossil","url":"https://h/","other_host":true}}}`))
	f.Add([]byte(`{"ocx":"node","user":"ocx","projects":{"demo":{"repository":"/srv/demo.fossil","url":"http://127.0.0.1:8080/","remote_nodes":[{"user":"lab-1","poke":"https://lab-1.example.org/","poke_secret":"0123456789abcdef0123456789abcdef"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := DecodeNodeConfig(data); err == nil {
			again, err := c.Encode()
			if err != nil {
				t.Fatalf("a decoded node.json does not encode: %v", err)
			}
			if c2, err := DecodeNodeConfig(again); err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("node.json does not round-trip: %v", err)
			}
		}
		if b, err := DecodeBinding(data); err == nil {
			again, err := b.Encode()
			if err != nil {
				t.Fatalf("a decoded binding does not encode: %v", err)
			}
			if b2, err := DecodeBinding(again); err != nil || !reflect.DeepEqual(b, b2) {
				t.Fatalf("binding does not round-trip: %v", err)
			}
		}
	})
}

// TestEncodeShownHidesSecrets: node.json as a plan shows it holds no
// secret; the node.json encoded holds each, and reads back.
func TestEncodeShownHidesSecrets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genNodeConfig().Draw(t, "node")
		shown, err := c.EncodeShown()
		if err != nil {
			t.Fatalf("encode shown %s: %v", c, err)
		}
		var secrets []string
		if c.Pull != nil && c.Pull.Secret != "" {
			secrets = append(secrets, c.Pull.Secret)
		}
		for _, p := range c.Projects {
			for _, r := range p.RemoteNodes {
				if r.PokeSecret != "" {
					secrets = append(secrets, r.PokeSecret)
				}
			}
		}
		for _, s := range secrets {
			if strings.Contains(string(shown), s) {
				t.Fatalf("node.json shown holds a secret:\n%s", shown)
			}
		}
		data, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if !strings.Contains(string(data), s) {
				t.Fatalf("node.json encoded lost a secret")
			}
		}
	})
}
