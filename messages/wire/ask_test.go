package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func TestAskRoundTrip(t *testing.T) {
	a := NewAsk(AskHook)
	a.Repo = "/srv/demo.fossil"
	a.Hashes = []string{strings.Repeat("a", 40), strings.Repeat("b", 64)}
	line, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeAsk(line)
	if err != nil {
		t.Fatalf("DecodeAsk(%s): %v", line, err)
	}
	if got.Kind != AskHook || got.Repo != a.Repo || len(got.Hashes) != 2 || got.Hashes[1] != a.Hashes[1] {
		t.Fatalf("DecodeAsk = %+v, want %+v", got, a)
	}
	st, err := DecodeAsk([]byte(`{"ocx":"ask","v":1,"ask":"status"}`))
	if err != nil || st.Kind != AskStatus {
		t.Fatalf("status ask: %+v, %v", st, err)
	}
	rs, err := DecodeAsk([]byte(`{"ocx":"ask","v":1,"ask":"runs","project":"demo","run":"0123456789ab"}`))
	if err != nil || rs.Kind != AskRuns || rs.Project != "demo" || rs.Run != "0123456789ab" {
		t.Fatalf("runs ask: %+v, %v", rs, err)
	}
}

// TestAskRefusals: each malformed ask is refused with an error naming what
// is wrong.
func TestAskRefusals(t *testing.T) {
	h := strings.Repeat("a", 40)
	for _, c := range []struct{ line, want string }{
		{`{"ocx":"ask","v":1,"ask":"hook","repo":"/r","hashes":["` + h + `"]} {}`, "more after"},
		{`[1]`, "JSON object"},
		{`{"ocx":"note","v":1,"ask":"status"}`, `"ask"`},
		{`{"ocx":"ask","v":2,"ask":"status"}`, "version 1"},
		{`{"ocx":"ask","ask":"status"}`, "protocol version"},
		{`{"ocx":"ask","v":1}`, "what it asks for"},
		{`{"ocx":"ask","v":1,"ask":"reboot"}`, "one of hook, status"},
		{`{"ocx":"ask","v":1,"ask":"runs"}`, "project"},
		{`{"ocx":"ask","v":1,"ask":"runs","project":"../x"}`, "project"},
		{`{"ocx":"ask","v":1,"ask":"runs","project":"demo","run":"abc"}`, "run"},
		{`{"ocx":"ask","v":1,"ask":"runs","project":"demo","run":"0123456789xy"}`, "run"},
		{`{"ocx":"ask","v":1,"ask":"runs","project":"demo","repo":"/r"}`, "not a repository"},
		{`{"ocx":"ask","v":1,"ask":"status","project":"demo"}`, "names no repository"},
		{`{"ocx":"ask","v":1,"ask":"hook"}`, "names the repository"},
		{`{"ocx":"ask","v":1,"ask":"hook","repo":"demo.fossil"}`, "absolute path"},
		{`{"ocx":"ask","v":1,"ask":"hook","repo":"/r","hashes":["zz"]}`, "hashes[0]"},
		{`{"ocx":"ask","v":1,"ask":"status","repo":"/r"}`, "names no repository"},
		{`{"ocx":"ask","v":1,"v":1,"ask":"status"}`, "twice"},
		{"{\"ocx\":\"ask\",\"v\":1,\"ask\":\"st\xffatus\"}", "UTF-8"},
		{`{"ocx":"ask","v":1,"ask":"page"}`, "1 to 256"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=POST"]}`, "GET or HEAD"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=GET","PATH_INFO=//git/info/refs"]}`, "git mirror"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=GET","PATH_INFO=/git/"]}`, "git mirror"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["PATH_INFO=/state"]}`, "GET or HEAD"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=GET","=x"]}`, "env[1]"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=GET","NOEQUALS"]}`, "NAME=VALUE"},
		{`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=GET"],"repo":"/r"}`, "names no repository"},
		{`{"ocx":"ask","v":1,"ask":"status","env":["REQUEST_METHOD=GET"]}`, "only a page ask"},
		{`{"ocx":"ask","v":1,"ask":"hook","repo":"/r","env":["A=1"]}`, "only a page ask"},
	} {
		_, err := DecodeAsk([]byte(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeAsk(%s) = %v, want an error naming %q", c.line, err, c.want)
		}
	}
	if _, err := DecodeAsk([]byte(`{"ocx":"ask","v":1,"ask":"hook"}`)); !errors.Is(err, strictjson.ErrMissing) {
		t.Errorf("a hook ask without its repository: %v, want ErrMissing", err)
	}
}

func TestReplyRoundTrip(t *testing.T) {
	r := NewReply()
	r.Receipts = map[string]Receipt{"demo": {Rcvid: 42}}
	r.Hook = &HookDone{Artifacts: 3, Mark: 42}
	line, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeReply(line)
	if err != nil {
		t.Fatalf("DecodeReply(%s): %v", line, err)
	}
	if got.Receipts["demo"].Rcvid != 42 || got.Hook == nil || *got.Hook != *r.Hook || got.Error != "" {
		t.Fatalf("DecodeReply = %+v", got)
	}
	for _, c := range []struct{ line, want string }{
		{`{"ocx":"reply","v":1,"hook":{"artifacts":1}}`, "hook's mark"},
		{`{"ocx":"reply","v":1,"receipts":{"demo":{"rcvid":-1}}}`, "receipts.demo.rcvid"},
		{`{"ocx":"ask","v":1}`, `"reply"`},
		{`{"ocx":"reply","v":1,"error":""}`, "leave the key out"},
		{`{"ocx":"reply","v":1,"state":{"ocx":"state"}}`, "state"},
		{`{"ocx":"reply","v":1,"runs":[{"run":"ab","state":"none","in_care":false,"alive":false}]}`, "runs[0]: run"},
		{`{"ocx":"reply","v":1,"runs":[{"run":"` + strings.Repeat("a", 40) + `","state":"gone","in_care":false,"alive":false}]}`, "runs[0]: state"},
	} {
		_, err := DecodeReply([]byte(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeReply(%s) = %v, want an error naming %q", c.line, err, c.want)
		}
	}
}

// FuzzDecodeAsk: no line makes the decoder panic, and an ask it takes
// encodes to a line it takes again, the same.
func FuzzDecodeAsk(f *testing.F) {
	f.Add([]byte(`{"ocx":"ask","v":1,"ask":"status"}`))
	f.Add([]byte(`{"ocx":"ask","v":1,"ask":"hook","repo":"/r","hashes":["` + strings.Repeat("c", 40) + `"]}`))
	f.Add([]byte(`{"ocx":"ask","v":1,"ask":"hook","repo":"/r","hashes":[1]}`))
	f.Add([]byte(`{"ocx":"ask","v":1,"ask":"runs","project":"demo","run":"0123456789ab"}`))
	f.Add([]byte(`{"ocx":"ask","v":1,"ask":"page","env":["REQUEST_METHOD=GET","PATH_INFO=/state"]}`))
	f.Add([]byte(`{"ocx":"ask","v":1,"ask":"pull","project":"demo"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := DecodeAsk(line)
		if err != nil {
			return
		}
		again, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeAsk(again)
		if err != nil {
			t.Fatalf("an ask taken once is refused the second time: %s: %v", again, err)
		}
		if b.Kind != a.Kind || b.Repo != a.Repo || b.Project != a.Project || b.Run != a.Run || strings.Join(b.Hashes, " ") != strings.Join(a.Hashes, " ") {
			t.Fatalf("round trip changed the ask: %+v then %+v", a, b)
		}
	})
}

// FuzzDecodeReply: no line makes the decoder panic.
func FuzzDecodeReply(f *testing.F) {
	f.Add([]byte(`{"ocx":"reply","v":1,"hook":{"artifacts":1,"mark":7}}`))
	f.Add([]byte(`{"ocx":"reply","v":1,"error":"no"}`))
	f.Add([]byte(`{"ocx":"reply","v":1,"receipts":{"demo":{"rcvid":3}}}`))
	f.Add([]byte(`{"ocx":"reply","v":1,"runs":[{"run":"` + strings.Repeat("a", 40) + `","state":"ended","exit":0,"in_care":true,"alive":false}]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := DecodeReply(line)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("a reply taken fails its own check: %v", err)
		}
	})
}
