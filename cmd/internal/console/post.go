package console

import (
	"crypto/hmac"
	"fmt"
	"net/http"
	"strings"

	"github.com/ocx-go/ocx/cmd/internal/consolepage"
)

// checkPost says whether a button's POST may act (D30): a POST, from a
// page of this repository (its Referer starts with the repository's base
// URL; Fossil passes no Origin), carrying the token of the viewer's login
// cookie, from a viewer holding admin or setup. Anything else is refused
// with 403 and writes nothing.
func checkPost(r *http.Request, f consolepage.Fossil, key []byte) *consolepage.Refusal {
	if r.Method != http.MethodPost {
		return &consolepage.Refusal{Status: http.StatusMethodNotAllowed, Reason: "a button is a POST; this was a " + r.Method}
	}
	ref := r.Header.Get("Referer")
	if ref == "" || !(ref == f.Base || strings.HasPrefix(ref, f.Base+"/") || strings.HasPrefix(ref, f.Base+"?")) {
		return &consolepage.Refusal{Status: http.StatusForbidden, Reason: fmt.Sprintf("the form was not sent from a page of this repository (%s): refused, nothing written", f.Base)}
	}
	if f.Viewer == "" || f.Cookie == "" {
		return &consolepage.Refusal{Status: http.StatusForbidden, Reason: "log in first: a button acts for a viewer Fossil has logged in"}
	}
	got := r.PostFormValue("token")
	if got == "" || !hmac.Equal([]byte(got), []byte(consolepage.Token(key, f.Cookie))) {
		return &consolepage.Refusal{Status: http.StatusForbidden, Reason: "the form's token is not this viewer's (a form from another page or another login): refused, nothing written"}
	}
	if !f.Admin() {
		return &consolepage.Refusal{Status: http.StatusForbidden, Reason: fmt.Sprintf("%s holds neither admin nor setup here: only they may press the console's buttons (D7)", f.Viewer)}
	}
	return nil
}
