package record

import (
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// AuditVerdict is one user's latest verdict on a check-in (protocol v1 E6).
type AuditVerdict struct {
	messages.Verdict
	User string // who sent the tag change, as the node's repository recorded it
	Tag  string // the tag change carrying it
}

// PassedVerdict is an audited tag change that is no verdict (its value
// does not read as one, messages.ParseVerdict): a reader passes over it,
// the sender's earlier verdict standing, and logs it (once).
type PassedVerdict struct {
	Tag    string // the tag change
	Sender string
	Why    string
}

// AuditVerdicts reads each user's latest verdict on the check-in ci from the
// audited tag's history (fossilio.CheckinTags), in the server's order of
// those latest changes. A change counts only when its sender is known and
// did not send the check-in (E6); the name its U card gives proves nothing
// (E2, D47), so the user it names judges it as anyone may. A cancel
// withdraws its sender's verdict; a value that is no verdict is passed
// over, and the sender's earlier verdict stands.
func AuditVerdicts(ci fossilio.Info, changes []fossilio.TagChange) []AuditVerdict {
	kept, _ := AuditVerdictsOf(ci, changes)
	return kept
}

// AuditVerdictsOf is AuditVerdicts, and the changes it passed over for
// holding no verdict, in the server's order: for a reader that logs them.
func AuditVerdictsOf(ci fossilio.Info, changes []fossilio.TagChange) ([]AuditVerdict, []PassedVerdict) {
	latest := map[string]int{}
	var out []*AuditVerdict
	var passed []PassedVerdict
	for _, c := range changes {
		if c.Name != messages.AuditedTag || c.Sender == "" || c.Sender == ci.Sender {
			continue
		}
		var v *AuditVerdict
		if c.Op != fossilio.TagCancel {
			pv, err := messages.ParseVerdict(c.Value)
			if err != nil {
				passed = append(passed, PassedVerdict{Tag: c.Hash, Sender: c.Sender, Why: err.Error()})
				continue
			}
			v = &AuditVerdict{Verdict: pv, User: c.Sender, Tag: c.Hash}
		}
		if i, ok := latest[c.Sender]; ok {
			out[i] = nil
		}
		latest[c.Sender] = len(out)
		out = append(out, v)
	}
	var kept []AuditVerdict
	for _, v := range out {
		if v != nil {
			kept = append(kept, *v)
		}
	}
	return kept, passed
}
