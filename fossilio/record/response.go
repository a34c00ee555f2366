package record

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
)

// runResponse is the response of one run of a protocol v1 record (seed 001
// E5, D51): a reply in the record's thread holding a response block that
// answers the record, sent by the record's node user (E5: no other
// sender's counts).
type runResponse struct {
	Hash     string
	Response *messages.Response
}

// ResponseOf finds the response that counts for the run a launch note
// started in record's thread (E5, D51): of the responses answering record
// that nodeUser sent in the thread, each read from its first version,
// received after the launch and before end (the node user's end note of
// that run; "" for a run not yet ended: up to now), the last in the
// server's order. A response any other login wrote, the agent's among
// them, never counts. ok is false when there is none.
func ResponseOf(ctx context.Context, r *fossilio.Repo, record, nodeUser, launch, end string) (runResponse, bool, error) {
	if !r.SendersKnown() {
		return runResponse{}, false, fmt.Errorf("read the response to %s in %s: a clone does not know who sent what", record, r.Path())
	}
	// A ticket's id names no post: a ticket is never a v1 record.
	info, err := r.Info(ctx, record)
	if errors.Is(err, fossilio.ErrNotFound) || (err == nil && (info.Kind != fossilio.KindPost || info.InReplyTo != "")) {
		return runResponse{}, false, nil
	}
	if err != nil {
		return runResponse{}, false, fmt.Errorf("read the response to %s: %w", record, err)
	}
	posts, err := r.Thread(ctx, record)
	if err != nil {
		return runResponse{}, false, fmt.Errorf("read the response to %s: %w", record, err)
	}
	var out runResponse
	found, after := false, launch == ""
	for _, p := range posts {
		if p.First == end || p.Hash == end {
			break
		}
		if !after {
			after = p.First == launch || p.Hash == launch
			continue
		}
		if p.First != p.Hash {
			// A message is read from its first version, and its sender is
			// that version's.
			if p, err = r.Post(ctx, p.First); err != nil {
				continue
			}
		}
		if p.Sender != nodeUser || !strings.Contains(p.Text, `"response"`) {
			continue
		}
		resp, err := messages.ReadResponse([]byte(p.Text))
		if err != nil || resp.Answers != record {
			continue
		}
		out, found = runResponse{Hash: p.Hash, Response: resp}, true
	}
	return out, found, nil
}
