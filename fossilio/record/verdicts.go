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

// AuditVerdicts reads each user's latest verdict on the check-in ci from the
// audited tag's history (fossilio.CheckinTags), in the server's order of
// those latest changes. A change counts only when its sender is known and
// is neither the check-in's sender nor the user Fossil records in it; a
// cancel withdraws its sender's verdict; a value that is no verdict is
// passed over, and the sender's earlier verdict stands.
func AuditVerdicts(ci fossilio.Info, changes []fossilio.TagChange) []AuditVerdict {
	latest := map[string]int{}
	var out []*AuditVerdict
	for _, c := range changes {
		if c.Name != messages.AuditedTag || c.Sender == "" || c.Sender == ci.Sender || c.Sender == ci.Author {
			continue
		}
		var v *AuditVerdict
		if c.Op != fossilio.TagCancel {
			pv, err := messages.ParseVerdict(c.Value)
			if err != nil {
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
	return kept
}
