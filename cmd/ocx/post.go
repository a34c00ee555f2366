package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ocx-go/ocx/cmd/internal/node"
)

// text reads --text, or standard input when it is "-".
func text(e *env, s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read the text from standard input: %w", err)
	}
	return string(b), nil
}

func runWrite(ctx context.Context, e *env, args []string, name, usage string, title bool, do func(n *node.Node, in node.PostInput) *node.Answer) error {
	var c common
	fs := c.flags(e, name, usage, true, true)
	project := fs.String("project", "", "the project (default: the node's one project)")
	body := fs.String("text", "", "the text, in Markdown (- reads standard input)")
	var to, heading *string
	if title {
		heading = fs.String("title", "", "the title")
	} else {
		to = fs.String("to", "", "the post to reply to, or the ticket to comment on")
	}
	_, _, err := parseArgs(fs, args, noArgs)
	if err != nil {
		return err
	}
	in := node.PostInput{Project: *project, DryRun: c.dryRun}
	if in.Text, err = text(e, *body); err != nil {
		return err
	}
	if title {
		in.Title = *heading
	} else {
		in.To = *to
	}
	return c.act(e, func(n *node.Node) *node.Answer { return do(n, in) })
}

func runPost(ctx context.Context, e *env, args []string) error {
	return runWrite(ctx, e, args, "post", "post --to HASH --text TEXT --user USER", false, func(n *node.Node, in node.PostInput) *node.Answer {
		return n.Post(ctx, in)
	})
}

func runThread(ctx context.Context, e *env, args []string) error {
	return runWrite(ctx, e, args, "thread", "thread --title TITLE --text TEXT --user USER", true, func(n *node.Node, in node.PostInput) *node.Answer {
		return n.Thread(ctx, in)
	})
}

func runTicket(ctx context.Context, e *env, args []string) error {
	return runWrite(ctx, e, args, "ticket", "ticket --title TITLE --text TEXT --user USER", true, func(n *node.Node, in node.PostInput) *node.Answer {
		return n.Ticket(ctx, in)
	})
}
