package wire

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/strictjson"
)

// The server's node vouches for artifacts to a node on another host (issue
// 25, D72): for each hash, the login the server received it from, its
// place in the server's order and its sender's standing, with the users
// its receipts name, each with whether it holds admin or setup, and
// nothing of the server's other users (D81). The console's receipt page
// answers it in JSON (GET /ext/console/receipt/HASH for one artifact, a
// POST of hashes for many), to a node user its node.json lists alone; it
// answers anyone logged in who asks of no artifact what it holds of them
// alone (Viewer).

// ReceiptsKind is the "ocx" of a receipts answer.
const ReceiptsKind = "receipts"

// MaxReceiptsAsked bounds the hashes one ask names; MaxReceiptsLen the
// answer's bytes (a thousand receipts and the users of a large server).
const (
	MaxReceiptsAsked = 1000
	MaxReceiptsLen   = 8 << 20
)

// Receipts is the server's answer for some artifacts.
type Receipts struct {
	Ocx string `json:"ocx" why:"a receipts answer says \"ocx\": \"receipts\""`
	// Project is the server's project code: a node checks that its clone
	// is of it, and clones with the shared secret it makes.
	Project  string          `json:"project" why:"a receipts answer names the server's project code"`
	Receipts []ReceiptAnswer `json:"receipts" why:"a receipts answer lists a receipt for each hash asked"`
	// Users are the users its receipts name, each once, with whether it
	// holds admin or setup now, as the server reads it (D27): a node
	// learns the standing of those whose artifacts it holds, and nothing
	// of the server's other users (D81).
	Users []ServerUser `json:"users" why:"a receipts answer lists the users its receipts name" ocx:"closed"`
	// Viewer is the login that asked, as the server holds it.
	Viewer ReceiptViewer `json:"viewer" why:"a receipts answer names the login that asked (a server's node of an older release names none, D81)"`
}

// ReceiptViewer is the login that asked for receipts: its own capability
// letters (its user row's: empty once withdrawn), those the server grants
// it (its own, nobody's and anonymous's, with u, v, a and s expanded),
// and whether it holds admin or setup. What a node on another host asks
// of a caller or an agent login, logged in as it (D81).
type ReceiptViewer struct {
	Login      string `json:"login" why:"a viewer names its login"`
	Caps       string `json:"caps" ocx:"empty"`
	Effective  string `json:"effective" ocx:"empty"`
	Privileged bool   `json:"privileged,omitempty"`
}

// ReceiptAnswer is what the server says of one artifact.
type ReceiptAnswer struct {
	Hash string `json:"hash" why:"a receipt names its artifact"`
	// Known is false when the server holds no such artifact; nothing else
	// is said then.
	Known bool `json:"known" why:"a receipt says whether the server holds the artifact"`
	// Login is the user the server received it from; absent when the
	// receipt names none.
	Login string `json:"login,omitempty"`
	// Rcvid and Rid are its place in the server's order.
	Rcvid uint64 `json:"rcvid,omitempty"`
	Rid   uint64 `json:"rid,omitempty"`
	// Received is when the server received it.
	Received time.Time `json:"received,omitzero"`
	// Via is how: sync, web, local or unknown.
	Via string `json:"via,omitempty"`
	// Privileged: Login holds admin or setup now.
	Privileged bool `json:"privileged,omitempty"`
	// PrivilegedAtReceipt says whether Login held admin or setup when the
	// artifact was received; absent when the server cannot tell (a
	// capability that counts changed since).
	PrivilegedAtReceipt *bool `json:"privileged_at_receipt,omitempty"`
}

// ServerUser is a user a receipt names, and its standing.
type ServerUser struct {
	Login string `json:"login" why:"a user names its login"`
	// Privileged: the user holds admin or setup now.
	Privileged bool `json:"privileged,omitempty"`
}

// receiptVias are the ways an artifact may have come.
var receiptVias = []string{"unknown", "sync", "web", "local"}

// Validate checks an answer as a node takes it: its kind, a hash for
// each receipt and nothing said of one the server does not hold, a via it
// knows, each login valid, the users exactly those the receipts name,
// each once and with the standing its receipts say, and the viewer.
func (r *Receipts) Validate() error {
	if r.Ocx != ReceiptsKind {
		return strictjson.FieldErr("ocx", strictjson.ErrWrongKind, fmt.Sprintf("is %s; a receipts answer says %q", strictjson.QuoteShort(r.Ocx), ReceiptsKind))
	}
	if err := messages.CheckHash("project", r.Project); err != nil {
		return err
	}
	if len(r.Receipts) > MaxReceiptsAsked {
		return strictjson.FieldErr("receipts", strictjson.ErrInvalid, fmt.Sprintf("holds %d receipts; an answer holds at most %d", len(r.Receipts), MaxReceiptsAsked))
	}
	for i, rc := range r.Receipts {
		field := fmt.Sprintf("receipts[%d]", i)
		if err := messages.CheckHash(field+".hash", rc.Hash); err != nil {
			return err
		}
		if !rc.Known {
			if rc.Login != "" || rc.Rcvid != 0 || rc.Rid != 0 || !rc.Received.IsZero() || rc.Via != "" || rc.Privileged || rc.PrivilegedAtReceipt != nil {
				return strictjson.FieldErr(field, strictjson.ErrInvalid, "says something of an artifact the server does not hold")
			}
			continue
		}
		if rc.Login != "" {
			if err := checkFossilLogin(field+".login", rc.Login); err != nil {
				return err
			}
		}
		if !contains(receiptVias, rc.Via) {
			return strictjson.FieldErr(field+".via", strictjson.ErrInvalid, fmt.Sprintf("is %s; an artifact came by %s", strictjson.QuoteShort(rc.Via), strictjson.ListWords(receiptVias)))
		}
		if rc.Rid == 0 {
			return strictjson.FieldErr(field+".rid", strictjson.ErrMissing, "is missing; an artifact the server holds has a row")
		}
		if (rc.Privileged || rc.PrivilegedAtReceipt != nil && *rc.PrivilegedAtReceipt) && rc.Login == "" {
			return strictjson.FieldErr(field+".privileged", strictjson.ErrInvalid, "is said of no login")
		}
	}
	named := map[string]bool{} // the logins the receipts name, and their standing
	for _, rc := range r.Receipts {
		if rc.Known && rc.Login != "" {
			named[rc.Login] = rc.Privileged
		}
	}
	seen := map[string]bool{}
	for i, u := range r.Users {
		field := fmt.Sprintf("users[%d]", i)
		if err := checkFossilLogin(field+".login", u.Login); err != nil {
			return err
		}
		if seen[u.Login] {
			return strictjson.FieldErr(field+".login", strictjson.ErrInvalid, fmt.Sprintf("%s is listed twice", strictjson.QuoteShort(u.Login)))
		}
		seen[u.Login] = true
		priv, ok := named[u.Login]
		if !ok {
			return strictjson.FieldErr(field+".login", strictjson.ErrInvalid, fmt.Sprintf("%s is named by no receipt; an answer lists the users its receipts name alone", strictjson.QuoteShort(u.Login)))
		}
		if priv != u.Privileged {
			return strictjson.FieldErr(field+".privileged", strictjson.ErrInvalid, fmt.Sprintf("says %v of %s, its receipts %v", u.Privileged, strictjson.QuoteShort(u.Login), priv))
		}
	}
	for login := range named {
		if !seen[login] {
			return strictjson.FieldErr("users", strictjson.ErrMissing, fmt.Sprintf("lacks %s, whom a receipt names", strictjson.QuoteShort(login)))
		}
	}
	if err := checkFossilLogin("viewer.login", r.Viewer.Login); err != nil {
		return err
	}
	for _, f := range []struct{ name, caps string }{{"viewer.caps", r.Viewer.Caps}, {"viewer.effective", r.Viewer.Effective}} {
		for _, c := range f.caps {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return strictjson.FieldErr(f.name, strictjson.ErrInvalid, fmt.Sprintf("%s is not a string of capability letters", strictjson.QuoteShort(f.caps)))
			}
		}
	}
	return nil
}

// maxFossilLogin bounds a login a server reports.
const maxFossilLogin = 255

// checkFossilLogin accepts any login a Fossil server may hold, which is
// wider than the names OCX makes (D1): a person's "pat@example.com", the
// pseudo-users. It must be valid UTF-8 without a control character, and
// bounded.
func checkFossilLogin(field, s string) error {
	switch {
	case s == "":
		return strictjson.FieldErr(field, strictjson.ErrMissing, "is empty")
	case len(s) > maxFossilLogin:
		return strictjson.FieldErr(field, strictjson.ErrTooLong, fmt.Sprintf("is %d bytes; a login is at most %d", len(s), maxFossilLogin))
	case !utf8.ValidString(s):
		return strictjson.FieldErr(field, strictjson.ErrInvalid, "is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s holds a control character", strictjson.QuoteShort(s)))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Encode renders the answer, after validating it.
func (r *Receipts) Encode() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("receipts", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode receipts: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeReceipts reads a receipts answer strictly, naming the field at
// fault.
func DecodeReceipts(data []byte) (*Receipts, error) {
	r := &Receipts{}
	if err := decodeLine("receipts", data, MaxReceiptsLen, r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, strictjson.At("receipts", err)
	}
	return r, nil
}
