package remote

import (
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/wire"
)

// Answer is the receipts answer of the server's repository: what it said
// of each artifact, the users its receipts name with their standing (and
// none of the server's other users, D81), and the viewer who asked, as
// the console's receipt page writes them.
func Answer(project string, rs []fossilio.Receipt, viewer wire.ReceiptViewer) *wire.Receipts {
	out := &wire.Receipts{Ocx: wire.ReceiptsKind, Project: project, Receipts: make([]wire.ReceiptAnswer, 0, len(rs)),
		Users: []wire.ServerUser{}, Viewer: viewer}
	named := map[string]bool{}
	for _, rc := range rs {
		a := wire.ReceiptAnswer{Hash: rc.Hash, Known: rc.Known}
		if rc.Known {
			a.Login, a.Rcvid, a.Rid, a.Received = rc.Login, uint64(rc.Rcvid), uint64(rc.Rid), rc.Received
			a.Via, a.Privileged, a.PrivilegedAtReceipt = rc.Via.String(), rc.Privileged, rc.PrivilegedAtReceipt
			if rc.Login != "" && !named[rc.Login] {
				named[rc.Login] = true
				out.Users = append(out.Users, wire.ServerUser{Login: rc.Login, Privileged: rc.Privileged})
			}
		}
		out.Receipts = append(out.Receipts, a)
	}
	return out
}

// vias reads an answer's via back.
var vias = map[string]fossilio.Via{}

func init() {
	for _, v := range []fossilio.Via{fossilio.ViaUnknown, fossilio.ViaSync, fossilio.ViaWeb, fossilio.ViaLocal} {
		vias[v.String()] = v
	}
}

// fromAnswer is what a node keeps of an answer to the hashes it asked:
// each receipt and the standing of each user they name. An answer that
// does not answer exactly the hashes asked, in their order, is refused:
// the node never guesses (D72).
func fromAnswer(asked []string, a *wire.Receipts) ([]fossilio.Receipt, []fossilio.Standing, error) {
	if len(a.Receipts) != len(asked) {
		return nil, nil, fmt.Errorf("the server answered %d receipts for %d hashes asked", len(a.Receipts), len(asked))
	}
	rs := make([]fossilio.Receipt, len(asked))
	for i, r := range a.Receipts {
		if r.Hash != asked[i] {
			return nil, nil, fmt.Errorf("the server's receipt %d is for %s, asked for %s", i, r.Hash, asked[i])
		}
		rs[i] = fossilio.Receipt{Hash: r.Hash, Known: r.Known, Login: r.Login, Rcvid: int64(r.Rcvid), Rid: int64(r.Rid),
			Received: r.Received, Via: vias[r.Via], Privileged: r.Privileged, PrivilegedAtReceipt: r.PrivilegedAtReceipt}
	}
	standings := make([]fossilio.Standing, len(a.Users))
	for i, u := range a.Users {
		standings[i] = fossilio.Standing{Login: u.Login, Privileged: u.Privileged}
	}
	return rs, standings, nil
}
