package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func genReceipts() *rapid.Generator[*Receipts] {
	return rapid.Custom(func(t *rapid.T) *Receipts {
		r := &Receipts{Ocx: ReceiptsKind, Project: genHash().Draw(t, "project"), Receipts: []ReceiptAnswer{}, Users: []ServerUser{},
			Viewer: ReceiptViewer{Login: genLogin().Draw(t, "viewer"), Caps: rapid.StringMatching(`[a-z0-9]{0,8}`).Draw(t, "caps"),
				Effective: rapid.StringMatching(`[a-z0-9]{0,8}`).Draw(t, "effective"), Privileged: rapid.Bool().Draw(t, "viewer_privileged")}}
		standing := map[string]bool{}
		for range rapid.IntRange(0, 5).Draw(t, "n") {
			rc := ReceiptAnswer{Hash: genHash().Draw(t, "hash"), Known: rapid.Bool().Draw(t, "known")}
			if rc.Known {
				rc.Login = genOpt(genLogin()).Draw(t, "login")
				rc.Rcvid = rapid.Uint64Range(0, 1<<40).Draw(t, "rcvid")
				rc.Rid = rapid.Uint64Range(1, 1<<40).Draw(t, "rid")
				rc.Received = time.UnixMilli(rapid.Int64Range(0, 1<<42).Draw(t, "ms")).UTC()
				rc.Via = rapid.SampledFrom(receiptVias).Draw(t, "via")
				if rc.Login != "" {
					priv, seen := standing[rc.Login]
					if !seen {
						priv = rapid.Bool().Draw(t, "privileged")
						standing[rc.Login] = priv
						r.Users = append(r.Users, ServerUser{Login: rc.Login, Privileged: priv})
					}
					rc.Privileged = priv
					if rapid.Bool().Draw(t, "at_known") {
						at := rapid.Bool().Draw(t, "at")
						rc.PrivilegedAtReceipt = &at
					}
				}
			}
			r.Receipts = append(r.Receipts, rc)
		}
		return r
	})
}

// TestReceiptsRoundTrip: every answer the server's node writes reads back
// as it was.
func TestReceiptsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genReceipts().Draw(t, "receipts")
		data, err := r.Encode()
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		got, err := DecodeReceipts(data)
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, data)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	})
}

// TestReceiptsRefusals: an answer a node would take wrongly is refused,
// naming the field.
func TestReceiptsRefusals(t *testing.T) {
	h := strings.Repeat("a", 64)
	good := `{"ocx":"receipts","project":"` + strings.Repeat("c", 40) + `","receipts":[{"hash":"` + h + `","known":true,"login":"alice","rcvid":3,"rid":9,"received":"2026-12-06T04:00:00Z","via":"sync"}],"users":[{"login":"alice"}],"viewer":{"login":"lab-1","caps":"gio","effective":"gijorz"}}`
	if _, err := DecodeReceipts([]byte(good)); err != nil {
		t.Fatalf("the good answer is refused: %v", err)
	}
	// A server's logins are wider than OCX's names: a person's address.
	wide := strings.Replace(strings.Replace(good, `"login":"alice","rcvid"`, `"login":"pat@example.com","rcvid"`, 1), `"users":[{"login":"alice"}]`, `"users":[{"login":"pat@example.com"}]`, 1)
	if _, err := DecodeReceipts([]byte(wide)); err != nil {
		t.Fatalf("an answer with a server's own logins is refused: %v", err)
	}
	for _, c := range []struct {
		name, data, field string
		want              error
	}{
		{"wrong kind", strings.Replace(good, `"ocx":"receipts"`, `"ocx":"receipt"`, 1), "ocx", strictjson.ErrWrongKind},
		{"short hash", strings.Replace(good, h, "abc", 1), "receipts[0].hash", strictjson.ErrInvalid},
		{"login with a newline", strings.Replace(good, `"login":"alice","rcvid"`, `"login":"a\nb","rcvid"`, 1), "receipts[0].login", strictjson.ErrInvalid},
		{"unknown via", strings.Replace(good, `"via":"sync"`, `"via":"carrier pigeon"`, 1), "receipts[0].via", strictjson.ErrInvalid},
		{"no row", strings.Replace(good, `"rid":9,`, ``, 1), "receipts[0].rid", strictjson.ErrMissing},
		{"an unknown artifact with a login", strings.Replace(good, `"known":true`, `"known":false`, 1), "receipts[0]", strictjson.ErrInvalid},
		{"privileged nobody", strings.Replace(good, `"login":"alice","rcvid":3`, `"privileged":true,"rcvid":3`, 1), "receipts[0].privileged", strictjson.ErrInvalid},
		{"user twice", strings.Replace(good, `"users":[{"login":"alice"}]`, `"users":[{"login":"alice"},{"login":"alice"}]`, 1), "users[1].login", strictjson.ErrInvalid},
		{"a user no receipt names", strings.Replace(good, `"users":[{"login":"alice"}]`, `"users":[{"login":"alice"},{"login":"admin","privileged":true}]`, 1), "users[1].login", strictjson.ErrInvalid},
		{"a user the receipts name left out", strings.Replace(good, `"users":[{"login":"alice"}]`, `"users":[]`, 1), "users", strictjson.ErrMissing},
		{"a user's standing not its receipts'", strings.Replace(good, `"users":[{"login":"alice"}]`, `"users":[{"login":"alice","privileged":true}]`, 1), "users[0].privileged", strictjson.ErrInvalid},
		{"the server's user table", strings.Replace(good, `"users":[{"login":"alice"}]`, `"users":[{"login":"alice","caps":"gio"}]`, 1), "users[0].caps", strictjson.ErrUnknownKey},
		{"no viewer (an older server)", strings.Replace(good, `,"viewer":{"login":"lab-1","caps":"gio","effective":"gijorz"}`, ``, 1), "viewer", strictjson.ErrMissing},
		{"viewer caps with a space", strings.Replace(good, `"caps":"gio"`, `"caps":"g io"`, 1), "viewer.caps", strictjson.ErrInvalid},
		{"viewer effective with a dot", strings.Replace(good, `"effective":"gijorz"`, `"effective":"g.j"`, 1), "viewer.effective", strictjson.ErrInvalid},
		{"rcvid a string", strings.Replace(good, `"rcvid":3`, `"rcvid":"3"`, 1), "receipts[0].rcvid", strictjson.ErrInvalid},
		{"duplicate key", strings.Replace(good, `"known":true`, `"known":true,"known":false`, 1), "receipts[0].known", strictjson.ErrDuplicateKey},
		{"no project", strings.Replace(good, `"project":"`+strings.Repeat("c", 40)+`",`, ``, 1), "project", strictjson.ErrMissing},
		{"no users", strings.Replace(good, `,"users":[{"login":"alice"}]`, ``, 1), "users", strictjson.ErrMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeReceipts([]byte(c.data))
			var fe *strictjson.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, c.want) || fe.Field != c.field {
				t.Fatalf("got %v; want a %v naming field %q", err, c.want, c.field)
			}
		})
	}
}

// FuzzDecodeReceipts: no answer makes the decoder panic, and what it
// takes encodes and reads back the same.
func FuzzDecodeReceipts(f *testing.F) {
	h := strings.Repeat("b", 64)
	f.Add([]byte(`{"ocx":"receipts","project":"` + h[:40] + `","receipts":[{"hash":"` + h + `","known":true,"login":"a","rid":1,"via":"web","privileged_at_receipt":false}],"users":[{"login":"a"}],"viewer":{"login":"n","caps":"","effective":""}}`))
	f.Add([]byte(`{"ocx":"receipts","receipts":[{"hash":"` + h + `","known":false}],"users":[{"login":"nobody"}],"viewer":{"login":"n","caps":"s","effective":"s","privileged":true}}`))
	f.Add([]byte(`{"ocx":"receipts","receipts":[],"users":[{"login":"x","privileged":true}],"more":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReceipts(data)
		if err != nil {
			return
		}
		again, err := r.Encode()
		if err != nil {
			t.Fatalf("a decoded answer does not encode: %v", err)
		}
		r2, err := DecodeReceipts(again)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("the answer does not round-trip: %v\n%s", err, again)
		}
	})
}
