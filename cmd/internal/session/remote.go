package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	ocxmcp "github.com/ocx-go/ocx/cmd/internal/mcp"
	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/messages/toolio"
)

// remote is the node as a session reaches it: where it reads a post it is
// woken for and writes its replies, notes and CI tags. A session whose clone
// remembers its password reaches it over sync with that password
// (syncRemote); one whose clone remembers none (restrict no_password) over
// its MCP socket, as its agent login, through the tools (toolsRemote, D39).
type remote interface {
	// fetch returns one artifact's bytes, ErrNotFound when the node lacks it.
	fetch(ctx context.Context, hash string) ([]byte, error)
	// reply writes text as a reply to the post to in thread root.
	reply(ctx context.Context, root, to, text string) (string, error)
	// comment appends a Markdown comment to a ticket.
	comment(ctx context.Context, ticket, text string) (string, error)
	// tag adds the raw tag name=value to a check-in.
	tag(ctx context.Context, checkin, name, value string) (string, error)
}

// syncRemote writes over Fossil's sync with the password the clone
// remembers (contracts 4).
type syncRemote struct{ c *fossilio.Client }

func (r syncRemote) fetch(ctx context.Context, hash string) ([]byte, error) {
	data, err := r.c.Fetch(ctx, hash)
	if err != nil {
		return nil, err
	}
	return data[0], nil
}

func (r syncRemote) reply(ctx context.Context, root, to, text string) (string, error) {
	return r.c.Reply(ctx, root, to, text)
}

func (r syncRemote) comment(ctx context.Context, ticket, text string) (string, error) {
	return r.c.ChangeTicket(ctx, ticket,
		fossilio.Field{Name: "+icomment", Value: text}, fossilio.Field{Name: "mimetype", Value: fossilio.MarkdownMimetype})
}

func (r syncRemote) tag(ctx context.Context, checkin, name, value string) (string, error) {
	return r.c.Tag(ctx, checkin, name, value)
}

// toolsRemote reaches the node over the session's MCP socket (D39): a reply
// or note is the post tool, called as the session's agent login (the
// server knows its socket's workspace), so the record's restrictions hold
// for the session's own writes as for its agent's; a read is the socket's
// artifact resource. No tool comments on a ticket or tags a check-in, so a
// session without a password does neither, and says so.
type toolsRemote struct {
	path string
	wait time.Duration

	mu sync.Mutex
	cs *mcp.ClientSession
}

// mcpWait is how long a session waits for its MCP socket to appear: the
// daemon starts its server just after the session.
const mcpWait = 10 * time.Second

// errNoTool is why a session without a password cannot write something.
var errNoTool = errors.New("its clone holds no password (restrict no_password), so it writes only through the node's tools, and no tool writes this (D39)")

// client is the connection, made on first use and made again after one
// failed.
func (r *toolsRemote) client(ctx context.Context) (*mcp.ClientSession, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cs != nil {
		return r.cs, nil
	}
	cs, err := ocxmcp.Connect(ctx, r.path, r.wait)
	if err != nil {
		return nil, err
	}
	r.cs = cs
	return cs, nil
}

// drop forgets a connection that failed, so the next try connects again.
func (r *toolsRemote) drop(cs *mcp.ClientSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cs == cs {
		r.cs.Close()
		r.cs = nil
	}
}

// close ends the connection.
func (r *toolsRemote) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cs != nil {
		r.cs.Close()
		r.cs = nil
	}
}

func (r *toolsRemote) fetch(ctx context.Context, hash string) ([]byte, error) {
	cs, err := r.client(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: ocxmcp.ArtifactPrefix + hash})
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je) && je.Code == mcp.CodeResourceNotFound:
		return nil, fmt.Errorf("fetch %s over %s: %w", hash, r.path, fossilio.ErrNotFound)
	case errors.As(err, &je): // the node answered, and refused
		return nil, &permanentError{fmt.Errorf("fetch %s over %s: the node refused: %s", hash, r.path, je.Message)}
	case err != nil:
		r.drop(cs)
		return nil, fmt.Errorf("fetch %s over %s: %w", hash, r.path, err)
	}
	if len(res.Contents) != 1 || res.Contents[0] == nil {
		return nil, &permanentError{fmt.Errorf("fetch %s over %s: the node sent %d contents, not one", hash, r.path, len(res.Contents))}
	}
	return res.Contents[0].Blob, nil
}

func (r *toolsRemote) reply(ctx context.Context, _, to, text string) (string, error) {
	cs, err := r.client(ctx)
	if err != nil {
		return "", err
	}
	in, err := json.Marshal(toolio.PostArgs{To: to, Text: text})
	if err != nil {
		return "", err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolio.ToolPost, Arguments: json.RawMessage(in)})
	if err != nil {
		r.drop(cs)
		return "", fmt.Errorf("post over %s: %w", r.path, err)
	}
	a, err := ocxmcp.AnswerOf(res)
	if err != nil {
		return "", &permanentError{fmt.Errorf("post over %s: %w", r.path, err)}
	}
	if !a.OK() {
		return "", &permanentError{fmt.Errorf("post over %s: the node refused: %s", r.path, *a.Stopped)}
	}
	if a.Result == nil {
		return "", &permanentError{fmt.Errorf("post over %s: the node wrote nothing", r.path)}
	}
	return *a.Result, nil
}

func (r *toolsRemote) comment(_ context.Context, ticket, _ string) (string, error) {
	return "", &permanentError{fmt.Errorf("comment on ticket %s: %w", ticket, errNoTool)}
}

func (r *toolsRemote) tag(_ context.Context, checkin, name, _ string) (string, error) {
	return "", &permanentError{fmt.Errorf("tag %s on %s: %w", name, checkin, errNoTool)}
}
