package runengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/ocx-go/ocx/actors"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/fossilio/record"
	"github.com/ocx-go/ocx/host"
	runeng "github.com/ocx-go/ocx/host/runs"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/protocol"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// The record of seed 004's runs, as the daemon reads it: the run engine
// messages of each repository (record.RunLog, read incrementally), which
// count (record.StandingOf), and what section 11 refuses.

// Record reads seed 004's runs on the node's repositories: what an
// artifact holding a run engine message is to the daemon, and what
// section 11 refuses.
type Record struct {
	cfg    *messages.NodeConfig
	layout host.Layout
	repos  *noderepos.Repos
	// support is what the host can give a run (refusal row 8); nil for a
	// node that starts no runs (a test's).
	support func() host.RunSupport
	log     *slog.Logger
}

// NewRecord reads the runs of repos; support may be nil.
func NewRecord(cfg *messages.NodeConfig, layout host.Layout, repos *noderepos.Repos, support func() host.RunSupport, log *slog.Logger) *Record {
	return &Record{cfg: cfg, layout: layout, repos: repos, support: support, log: log}
}

// refusalOf checks a run that arrived against section 11's rows 1 to 8
// (runmsg.RunRefusal), with the facts read from the repository and the
// host, and returns ended's note, "" when none holds. Row 9 needs the
// values the workspace sets, so it is checked when the run is prepared.
func (r *Record) refusalOf(ctx context.Context, x *noderepos.Index, msgs []record.RunMsg, m record.RunMsg, privileged record.PrivilegedFunc, support host.RunSupport) (string, error) {
	run := m.Run()
	var decodeErr error
	if m.Malformed != nil {
		decodeErr = m.Malformed
	}
	f, err := r.refusalFacts(ctx, x, msgs, m, privileged, support)
	if err != nil {
		return "", err
	}
	if ref := runmsg.RunRefusal(run, decodeErr, f); ref != nil {
		return ref.Note, nil
	}
	return hostRefusal(run, support), nil
}

// refusalFacts are what section 11's rows read of the repository, the
// node and the host for the run m.
func (r *Record) refusalFacts(ctx context.Context, x *noderepos.Index, msgs []record.RunMsg, m record.RunMsg, privileged record.PrivilegedFunc, support host.RunSupport) (runmsg.RefusalFacts, error) {
	run := m.Run()
	f, err := record.RunRecordFacts(ctx, x.Repo, msgs, m, r.cfg.User, privileged)
	if err != nil {
		return f, err
	}
	// The server's node sets a run user's password itself; a node on
	// another host reads it from its file of passwords (section 5,
	// password; row 6): none, or one it does not trust (another account's,
	// a mode others may read, lines that do not read), holds none, and the
	// refusal names why (D72).
	f.ServerNode = !x.OtherHost
	// node.json's confined_only (row 7, D53).
	f.NothingUnconfined = r.cfg.ConfinedOnly
	f.Provides = provision(support)
	if x.OtherHost && run != nil && run.HasPasswordStep() {
		if f.HasPassword, f.PasswordsWhy, err = runeng.PasswordFacts(r.layout.Root(), run.Process.User); err != nil {
			return f, err
		}
	}
	return f, nil
}

// provision is what the host provides a run (row 8), in section 11's terms.
func provision(support host.RunSupport) runmsg.RunProvision {
	p := runmsg.RunProvision{Sandbox: support.Sandbox == "", Capabilities: host.Capabilities[:], NoNetwork: true,
		Limits: []string{messages.LimitWall}, Deliveries: true, Manual: true, Terminal: true, LimitWhy: map[string]string{}}
	for _, l := range []struct{ name, why string }{
		{messages.LimitCPU, support.CPU}, {messages.LimitProcesses, support.Processes}, {messages.LimitMemory, support.Memory},
		{messages.LimitDisk, support.Disk},
	} {
		if l.why == "" {
			p.Limits = append(p.Limits, l.name)
		} else {
			p.LimitWhy[l.name] = l.why
		}
	}
	return p
}

// hostRefusal is row 8 in the host's own terms: a limit the host enforces
// only inside a sandbox. "" when the host gives the run what it asks.
func hostRefusal(run *runmsg.Run, support host.RunSupport) string {
	var sb *host.RunSandbox
	if run.Sandbox != nil {
		sb = &host.RunSandbox{}
	}
	var lim host.RunLimits
	if l := run.Limits; l != nil {
		if l.CPU != nil {
			lim.CPU = *l.CPU
		}
		if l.Processes != nil {
			lim.Processes = *l.Processes
		}
		if l.Memory != "" {
			lim.Memory, _ = l.Memory.Bytes()
		}
		if l.Disk != "" {
			lim.Disk, _ = l.Disk.Bytes()
		}
	}
	if err := support.Check(sb, lim); err != nil {
		var np *host.NotProvidedError
		if errors.As(err, &np) {
			return fmt.Sprintf("%s: %s", np.Field, np.Why)
		}
		return err.Error()
	}
	return ""
}

// Classify says what a post or ticket change holding a seed 004 message
// is to the daemon: a run for this node (RunArrived, refused or not), a
// stop that counts (RunStopRequested), or nothing (and why). handled is
// false when the artifact holds no run engine message.
func (r *Record) Classify(ctx context.Context, x *noderepos.Index, hash string) (actors.Classification, bool, error) {
	msgs, err := x.Runs(ctx)
	if err != nil {
		return actors.Classification{}, true, err
	}
	i := slices.IndexFunc(msgs, func(m record.RunMsg) bool { return m.Hash == hash })
	if i < 0 {
		return actors.Classification{}, false, nil
	}
	m := msgs[i]
	privileged := x.PrivilegedOnce(ctx)
	v := record.VerdictOf(msgs, i, r.cfg.User, privileged)
	switch {
	case v.Run:
		note, err := r.refusalOfIn(ctx, x, msgs[:i+1], m, privileged)
		if err != nil {
			return actors.Classification{}, true, err
		}
		ev := protocol.RunArrived{Facts: factsOf(x, hash, m.At(), m.Run()), Refusal: note}
		if note == "" && !ev.Facts.Manual {
			// Found to begin: the runs after it keep its place (D86).
			st := record.StandingOf(msgs, m, privileged)
			ev.InOrder = !st.StartedCounts && !st.EndedCounts
		}
		return actors.Classification{Run: &protocol.RunRouted{Run: hash, Event: ev}}, true, nil
	case v.Stop != "":
		return actors.Classification{Run: &protocol.RunRouted{Run: v.Stop, Event: protocol.RunStopRequested{By: m.Sender, Privileged: true}}}, true, nil
	}
	r.log.Info("a run engine message the daemon does not act on: "+v.Nothing, slog.String(actors.KeyHash, hash), slog.String("kind", string(m.Kind())), slog.String("sender", m.Sender))
	return actors.Classification{Nothing: v.Nothing}, true, nil
}

// refusalOfIn is refusalOf for a run of x, whose messages up to the run are
// msgs.
func (r *Record) refusalOfIn(ctx context.Context, x *noderepos.Index, msgs []record.RunMsg, m record.RunMsg, privileged record.PrivilegedFunc) (string, error) {
	support := host.RunSupport{Sandbox: "this node starts no runs", CPU: "-", Processes: "-", Memory: "-"}
	if r.support != nil {
		support = r.support()
	}
	return r.refusalOf(ctx, x, msgs, m, privileged, support)
}

// StartRun is a start of a manual run with OCX's run tool (`run start
// REPOSITORY HASH USER`): the run read from the record again, then, for its
// actor, its arrival (so a run the daemon holds no actor for, after a
// restart, waits first; an actor already waiting ignores it) and the start,
// with By's standing now and section 11 checked again (section 11: "when it
// arrives and again when a person starts it"). nothing says why there is no
// start to give.
func (r *Record) StartRun(ctx context.Context, e protocol.StartRun) ([]protocol.RunRouted, string, error) {
	project, ok := r.repos.ByPath(e.Repository)
	if !ok {
		return nil, fmt.Sprintf("%s is not a repository of this node (node.json)", e.Repository), nil
	}
	x, err := r.repos.Index(project)
	if err != nil {
		return nil, "", err
	}
	msgs, err := x.Runs(ctx)
	if err != nil {
		return nil, "", err
	}
	i := record.IndexRun(msgs, e.Run)
	if i < 0 {
		return nil, fmt.Sprintf("%s is no run on %s", e.Run, project), nil
	}
	m := msgs[i]
	privileged := x.PrivilegedOnce(ctx)
	if why := record.WhyNoStart(msgs, i, r.cfg.User, privileged); why != "" {
		return nil, why, nil
	}
	run := m.Run()
	note, err := r.refusalOfIn(ctx, x, msgs[:i+1], m, privileged)
	if err != nil {
		return nil, "", err
	}
	// The arrival as it was (a refusal then ended it: it would not wait).
	return []protocol.RunRouted{
		{Run: e.Run, Event: protocol.RunArrived{Facts: factsOf(x, e.Run, m.At(), run)}},
		{Run: e.Run, Event: protocol.RunStartRequested{By: e.By, Privileged: privileged(e.By), Refusal: note}},
	}, "", nil
}
