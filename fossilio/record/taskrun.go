package record

import (
	"context"
	"errors"
	"fmt"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/runmsg"
)

// IsTaskRecord says whether hash is a protocol v1 record that counts for
// login on this node (seed 001 E3, D35): a thread's first post, as first
// written, holding a TaskRecord whose user is login and whose node is
// nodeUser, sent by a user holding admin or setup now (D7). A ticket's id,
// a reply, an edit and anything else are not.
func IsTaskRecord(ctx context.Context, r *fossilio.Repo, hash, login, nodeUser string) (bool, error) {
	t, err := readTaskRecord(ctx, r, hash)
	if err != nil || t.rec == nil || t.rec.User != login || t.rec.Node != nodeUser {
		return false, err
	}
	ok, err := r.Privileged(ctx, t.sender)
	if err != nil {
		return false, fmt.Errorf("read the record %s's sender: %w", hash, err)
	}
	return ok, nil
}

// taskRecord is what a record's first post holds: a TaskRecord (nil for
// none) and who sent it. A post never changes, so it is read once.
type taskRecord struct {
	rec    *runmsg.TaskRecord
	sender string
	// known: the repository holds the artifact (one it does not hold yet
	// may arrive, so that answer is not kept).
	known bool
	// why it holds no record, when it is a thread's first post.
	why string
}

// readTaskRecord reads the TaskRecord the post at hash holds, if it is a
// thread's first post as first written; rec is nil for anything else.
func readTaskRecord(ctx context.Context, r *fossilio.Repo, hash string) (taskRecord, error) {
	if hash == "" {
		return taskRecord{}, nil
	}
	info, err := r.Info(ctx, hash)
	if errors.Is(err, fossilio.ErrNotFound) {
		// A ticket's id names no artifact: a ticket is never a v1 record.
		return taskRecord{}, nil
	}
	if err != nil {
		return taskRecord{}, fmt.Errorf("read the record %s: %w", hash, err)
	}
	if info.Kind != fossilio.KindPost {
		return taskRecord{known: true, why: fmt.Sprintf("it is a %s, not a forum post", info.Kind)}, nil
	}
	if info.InReplyTo != "" || info.Edit {
		return taskRecord{known: true, why: "it is a reply or an edit, not a thread's first post as first written"}, nil
	}
	post, err := r.Post(ctx, info.Hash)
	if err != nil {
		return taskRecord{}, fmt.Errorf("read the record %s: %w", hash, err)
	}
	rec, err := runmsg.ReadTaskRecord([]byte(post.Text))
	if err != nil {
		return taskRecord{known: true, why: "its post holds no record: " + err.Error()}, nil
	}
	return taskRecord{rec: rec, sender: post.Sender, known: true}, nil
}

// isTaskRecord is IsTaskRecord on the index: the record's first post read
// once (taskRecord), whom D7 counts asked each time (under a pin, as of
// its read).
func (x *Index) isTaskRecord(ctx context.Context, hash, login string) (bool, error) {
	t, err := x.taskRecord(ctx, hash)
	if err != nil {
		return false, err
	}
	if t.rec == nil || t.rec.User != login || t.rec.Node != x.nodeUser {
		return false, nil
	}
	return x.Privileged(ctx, t.sender), nil
}

// taskRecord is readTaskRecord on the index: a post never changes, so each
// is read once.
func (x *Index) taskRecord(ctx context.Context, hash string) (taskRecord, error) {
	x.mu.Lock()
	t, known := x.taskRecords[hash]
	x.mu.Unlock()
	if known {
		return t, nil
	}
	t, err := readTaskRecord(ctx, x.repo, hash)
	if err != nil || !t.known {
		return t, err
	}
	x.mu.Lock()
	if x.taskRecords == nil {
		x.taskRecords = map[string]taskRecord{}
	}
	x.taskRecords[hash] = t
	x.mu.Unlock()
	return t, nil
}

// TaskRun is the launch that started the run of workspace key's session on
// record: the first launch note on record for key, in the server's order,
// that counts (D7: sent by a user holding admin or setup, or by the node
// user) and that the node user did not refuse (a refused launch started
// nothing); only launches before the entry before count, when before is
// given (the launch being judged), else every one. ok is false when none
// did. Whether record is a protocol v1 record is for OneRun to ask.
func (x *Index) TaskRun(ctx context.Context, key messages.WorkspaceKey, record string, before *Entry) (Entry, bool, error) {
	if err := x.Refresh(ctx); err != nil {
		return Entry{}, false, err
	}
	x.mu.Lock()
	var es []Entry
	for _, e := range x.launches[key] {
		if e.Record == record && !e.Ticket && (before == nil || (e.Hash != before.Hash && before.After(e))) {
			es = append(es, e)
		}
	}
	x.mu.Unlock()
	sortByServer(es)
	for _, e := range es {
		if !x.counts(ctx, e) {
			continue
		}
		if !x.refused(e.Hash) {
			return e, true, nil
		}
	}
	return Entry{}, false, nil
}

// OneRun is D76's rule on a launch of workspace key's session on record
// (seed 001 E4: create starts the agent, one process for its whole run;
// E5: each record gets exactly one response): when record is a protocol v1
// record of key's login on this node and a launch on it started its run
// already (TaskRun, before the launch judged when before is given), the
// reason a launch now is refused, naming that run; "" when it may launch.
// The record is read only when a run was started on it.
func (x *Index) OneRun(ctx context.Context, key messages.WorkspaceKey, record string, before *Entry) (string, error) {
	run, ran, err := x.TaskRun(ctx, key, record, before)
	if err != nil || !ran {
		return "", err
	}
	v1, err := x.isTaskRecord(ctx, record, key.Login)
	if err != nil || !v1 {
		return "", err
	}
	return fmt.Sprintf("%s is a protocol v1 record whose agent has had its run (launch %s): a record's agent runs once and its record gets one response (seed 001 E4, E5); to change a task, stop it and create another (E3)",
		fossilio.Short(record), fossilio.Short(run.Hash)), nil
}
