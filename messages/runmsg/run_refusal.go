package runmsg

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// RefusalRow is a row of seed 004's section 11: what ends a run refused.
// Rows are checked in order and the first that holds counts.
type RefusalRow int

// The rows of section 11. RunRefusal checks 1 to 8, which need no host;
// 9 (a sandbox path reaching the node's own files, once links are
// followed) and 10 (a workspace step failing) are the engine's, which
// checks them after RunRefusal passed, with the host, and reports them
// with the same numbers.
const (
	refusedSender     RefusalRow = 1 + iota // no user holding admin or setup sent it
	RefusedMalformed                        // a field missing, of the wrong type or form
	RefusedSteps                            // an unknown step kind, unmet needs, a value not set by then
	RefusedUser                             // its user is a node's, or holds admin or setup
	refusedOtherNode                        // its user works for another node
	RefusedNoPassword                       // a password step, and no password for its user
	refusedUnconfined                       // no sandbox, and the node runs nothing unconfined
	RefusedUnprovided                       // a sandbox setting or a limit the node cannot provide
	RefusedNodeFiles                        // a sandbox path reaches the node's own files (host)
	RefusedStepFailed                       // a workspace step fails (host)
)

// RunProvision is what a node can give a run (row 8).
type RunProvision struct {
	// Sandbox: it has a confining program (bwrap) at all.
	Sandbox bool
	// Capabilities are the Linux capabilities a sandbox may keep.
	Capabilities []string
	// NoNetwork: it can withhold the host's network (network false).
	NoNetwork bool
	// Limits are the limits it enforces, among wall, cpu, processes and
	// memory (a cgroup's, D46).
	Limits []string
	// LimitWhy says, for a limit not in Limits, why the node cannot
	// enforce it (the host's reason: no cgroup, and what lacks), for the
	// refusal's note; absent, the note says no more than that.
	LimitWhy map[string]string
	// Terminal, Deliveries and Manual: it holds a terminal for a run's
	// process (process.terminal), gives a session its deliveries
	// (process.session) and has the tool that starts a manual run
	// (process.manual). A node never runs a run with less than it asks
	// (table 1): a run asking one it lacks is refused, naming the field.
	Terminal, Deliveries, Manual bool
}

// RefusalFacts is what RunRefusal needs of the node and the repository, each
// read by the caller.
type RefusalFacts struct {
	// SenderPrivileged: the user the server received the run from holds
	// admin or setup.
	SenderPrivileged bool
	// NodeUser is this node's node user.
	NodeUser string
	// NodeUsers are the other nodes' node users known: each one named as
	// the node of a run an admin or setup sent.
	NodeUsers []string
	// Privileged are the users holding admin or setup.
	Privileged []string
	// BoundNode is the node the run's process.user works for: the node of
	// the first run, in the server's order, that an admin or setup sent
	// with that user, whatever became of it; "" when this run is the first.
	BoundNode string
	// ServerNode: this node is the server's node (it sets passwords itself).
	ServerNode bool
	// HasPassword: a node on another host holds a password for the user.
	HasPassword bool
	// PasswordsWhy, on a node on another host, says why its file of
	// passwords holds none it trusts (a wrong owner or mode, D72); row 6's
	// note names it.
	PasswordsWhy string
	// NothingUnconfined: the node runs nothing unconfined.
	NothingUnconfined bool
	// Provides is what it can give a run.
	Provides RunProvision
	// Values are the values the node sets before any step (nil:
	// nodeValueNames).
	Values []string
}

// Refusal is a row that held and its note, what ended's note says.
type Refusal struct {
	Row  RefusalRow
	Note string
}

func (r *Refusal) String() string { return fmt.Sprintf("refused row=%d note=%q", r.Row, r.Note) }

// RunRefusal checks a run against rows 1 to 8 of section 11 in order and
// returns the first that holds, or nil. run is the decoded run, or nil
// with decodeErr the error ReadMessage gave (a *MalformedMessage). Row 1
// comes first, so a run a user without admin or setup sent is refused for
// that whatever its form.
func RunRefusal(run *Run, decodeErr error, f RefusalFacts) *Refusal {
	if !f.SenderPrivileged {
		return &Refusal{refusedSender, "no user holding admin or setup sent this run"}
	}
	if run == nil || decodeErr != nil {
		if decodeErr == nil {
			decodeErr = errors.New("run: no run")
		}
		note := decodeErr.Error()
		var fe *strictjson.FieldError
		if errors.As(decodeErr, &fe) {
			note = fe.Error()
		}
		return &Refusal{RefusedMalformed, note}
	}
	if err := CheckRunValues(run, f.Values); err != nil {
		return &Refusal{RefusedSteps, "run: " + err.Error()}
	}
	u := run.Process.User
	switch {
	case u == f.NodeUser:
		return &Refusal{RefusedUser, fmt.Sprintf("process.user %s is this node's own user", strictjson.QuoteShort(u))}
	case slices.Contains(f.NodeUsers, u):
		return &Refusal{RefusedUser, fmt.Sprintf("process.user %s is a node's user", strictjson.QuoteShort(u))}
	case slices.Contains(f.Privileged, u):
		return &Refusal{RefusedUser, fmt.Sprintf("process.user %s holds admin or setup", strictjson.QuoteShort(u))}
	}
	if f.BoundNode != "" && f.BoundNode != f.NodeUser {
		return &Refusal{refusedOtherNode, fmt.Sprintf("process.user %s works for the node %s", strictjson.QuoteShort(u), strictjson.QuoteShort(f.BoundNode))}
	}
	if run.HasPasswordStep() && !f.ServerNode && !f.HasPassword {
		note := fmt.Sprintf("this node holds no password for %s, which the password step takes", strictjson.QuoteShort(u))
		if f.PasswordsWhy != "" {
			note += ": " + f.PasswordsWhy
		}
		return &Refusal{RefusedNoPassword, note}
	}
	if run.Sandbox == nil && f.NothingUnconfined {
		return &Refusal{refusedUnconfined, "the run has no sandbox, and this node runs nothing unconfined"}
	}
	if what := unprovided(run, f.Provides); what != "" {
		return &Refusal{RefusedUnprovided, what}
	}
	return nil
}

// unprovided names the first sandbox setting or limit the node cannot
// provide, in the run's order: sandbox, then limits.
func unprovided(run *Run, p RunProvision) string {
	if s := run.Sandbox; s != nil {
		if !p.Sandbox {
			return "sandbox: this node has no confining program"
		}
		for i, c := range s.Capabilities {
			if !slices.Contains(p.Capabilities, c) {
				return fmt.Sprintf("sandbox.capabilities[%d]: this node cannot keep the capability %s", i, strictjson.QuoteShort(c))
			}
		}
		if !s.Network && !p.NoNetwork {
			return "sandbox.network: this node cannot withhold the host's network"
		}
	}
	for _, l := range run.Limits.Names() {
		if !slices.Contains(p.Limits, l) {
			if why := p.LimitWhy[l]; why != "" {
				return fmt.Sprintf("limits.%s: this node cannot enforce it: %s", l, why)
			}
			return fmt.Sprintf("limits.%s: this node cannot enforce it", l)
		}
	}
	switch pr := run.Process; {
	case pr.Manual && !p.Manual:
		return "process.manual: this node has no tool to start a manual run yet"
	case pr.Session && !p.Deliveries:
		return "process.session: this node gives a session no deliveries yet"
	case pr.Terminal && !p.Terminal:
		return "process.terminal: this node holds no terminal for a run yet"
	}
	return ""
}
