package actors

import (
	"github.com/ocx-go/ocx/messages/protocol"
)

// RunBootProject is what the host reports of one project's runs when the
// daemon starts (or a re-exec's new image does), or once the record of a
// project served from another host is fresh (D77).
type RunBootProject struct {
	Project string
	// Fresh says its record can be judged now: the server's node's own
	// repository, or a clone pulled since the daemon started. A stale
	// clone's runs are not read: Runs is empty.
	Fresh bool
	// Runs are the node's runs of the project on the record, in the
	// record's order: what the record says of each (started, a stop and
	// ended that count) and what the node's care does (in care, the last
	// process and whether it, or its holder's status, was found).
	Runs []protocol.RunActorState
}

// RunBootDecision is what the node does with the runs a start found.
type RunBootDecision struct {
	// Restore are the runs whose actors start from the state found, in
	// the record's order: each in the node's care, and each found lost
	// (Lost says why; its process is not alive).
	Restore []protocol.RunActorState
	// Watch are the runs restored whose process (or holder) was found:
	// the daemon is not its parent now, so the engine watches it.
	Watch []protocol.RunActorState
	// Waiting are the projects whose runs wait for their record to be
	// fresh, untouched: on a stale clone a run's started or ended may not
	// show yet, and a run restored from it could be prepared and launched
	// twice, or ended twice (D77).
	Waiting []string
}

// DecideRunBoot decides, from what the host reports, which runs the node
// restores at a start: for each fresh project, each run in its care, and
// each its check (runsLost, seed 004 section 10's last paragraph) ends
// lost; each stale project waits.
func DecideRunBoot(projects []RunBootProject) RunBootDecision {
	var d RunBootDecision
	var onRecord []runOnRecord
	var care []runInCare
	var runs []protocol.RunActorState
	for _, p := range projects {
		if !p.Fresh {
			d.Waiting = append(d.Waiting, p.Project)
			continue
		}
		for _, st := range p.Runs {
			onRecord = append(onRecord, runOnRecord{Hash: st.Facts.Hash, StartedCounts: st.StartedCounts, EndedCounts: st.EndedCounts})
			if st.InCare {
				care = append(care, runInCare{Hash: st.Facts.Hash, Alive: st.Alive, StartsEach: st.Facts.StartsEach()})
			}
			runs = append(runs, st)
		}
	}
	lost := map[string]string{}
	for _, l := range runsLost(onRecord, care) {
		lost[l.Hash] = l.Note
	}
	for _, st := range runs {
		if n, ok := lost[st.Facts.Hash]; ok {
			st.Lost, st.Alive = n, false
		} else if !st.InCare {
			continue
		}
		d.Restore = append(d.Restore, st)
		if st.Alive {
			d.Watch = append(d.Watch, st)
		}
	}
	return d
}
