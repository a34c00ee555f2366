package record

import (
	"context"

	"github.com/ocx-go/ocx/messages"
)

// SessionEnd is how the last session of a workspace ended, as the record
// says: the daemon's end note, and the report its agent wrote on its own
// record after the launch, if any (a completes session ends on it).
type SessionEnd struct {
	End        *messages.EndNote
	EndHash    string
	Record     string // the session's own record
	Report     *messages.ReportNote
	ReportHash string
	// Response is the response its login wrote to its record when that is
	// a protocol v1 record (D51): the one that counts for its launch; nil
	// when there is none.
	Response *messages.ResponseStatus
}

// LastSessionEnd reads how the last session of workspace key ended, from
// the record idx indexes; nil when none ever ended.
func LastSessionEnd(ctx context.Context, idx *Index, key messages.WorkspaceKey) (*SessionEnd, error) {
	e, ok, err := idx.LatestEnd(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	end := e.Note.(*messages.EndNote)
	out := &SessionEnd{End: end, EndHash: e.Hash, Record: e.Record}
	_, launch, _, err := idx.Artifact(ctx, end.Launch)
	if err != nil {
		return out, nil // the end stands on its own
	}
	rep, ok, err := idx.Report(ctx, launch.Record, key.Login, launch)
	if err != nil {
		return nil, err
	}
	if ok {
		out.Report, out.ReportHash, out.Record = rep.Note.(*messages.ReportNote), rep.Hash, launch.Record
	}
	if launch.Record != "" {
		resp, ok, err := ResponseOf(ctx, idx.Repo(), launch.Record, idx.NodeUser(), end.Launch, e.Hash)
		if err != nil {
			return nil, err
		}
		if ok {
			out.Response = &messages.ResponseStatus{Record: launch.Record, Hash: resp.Hash, Outcome: resp.Response.Outcome, Note: resp.Response.Note}
		}
	}
	return out, nil
}

// ListenersOn returns the listeners the record states: each whose latest
// note its agent login sent is a listen note, in the order first stated.
func ListenersOn(ctx context.Context, idx *Index) ([]messages.Listener, error) {
	ls, err := idx.Listeners(ctx)
	if err != nil {
		return nil, err
	}
	var out []messages.Listener
	for _, l := range ls {
		if l.On {
			out = append(out, l.Listener)
		}
	}
	return out, nil
}
