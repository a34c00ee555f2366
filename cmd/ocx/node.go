package main

import (
	"context"
	"errors"
	"os"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/cmd/internal/node/setup"
	"github.com/ocx-go/ocx/fossilio"
)

// runNode is `ocx node`: nodes on other hosts (D72). On the server's
// node, add and remove list a remote node; on a node on another host,
// password keeps a run user's password in its file of passwords.
func runNode(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "node", map[string]action{
		"add": {summary: "list a node on another host: make its node user on each repository and let it read the receipts", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "node add", "node add USER --password-file FILE [--poke URL [--poke-secret-file FILE]] [--agents AGENTS] [--dry-run] [--json]", false, true)
			pwFile := fs.String("password-file", "", "a file holding the remote node user's password (mode 0600); else $OCX_PASSWORD")
			poke := fs.String("poke", "", "the URL the hook pokes the node at when something arrives (a POST that says: pull now): https, or http on loopback")
			secretFile := fs.String("poke-secret-file", "", "with --poke: a file holding the secret each poke carries (mode 0600); left out, the one node.json holds for the node, or a new one")
			pos, _, err := parseArgs(fs, args, oneArg("USER"))
			if err != nil {
				return err
			}
			pw, err := passwordOf(*pwFile)
			if err != nil {
				return err
			}
			secret, err := secretOf(*secretFile)
			if err != nil {
				return err
			}
			return c.act(e, func(n *node.Node) *node.Answer {
				return setup.NodeAdd(ctx, n, setup.NodeAddInput{User: pos[0], Password: pw, Poke: *poke, PokeSecret: secret, DryRun: c.dryRun})
			})
		}},
		"remove": {summary: "unlist a node on another host: its node user keeps no capability", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "node remove", "node remove USER [--agents AGENTS] [--dry-run] [--json]", false, true)
			pos, _, err := parseArgs(fs, args, oneArg("USER"))
			if err != nil {
				return err
			}
			return c.act(e, func(n *node.Node) *node.Answer { return setup.NodeRemove(ctx, n, pos[0], c.dryRun) })
		}},
		"password": {summary: "on a node on another host, keep a run user's password in AGENTS/run-passwords", run: func(ctx context.Context, e *env, args []string) error {
			var c common
			fs := c.flags(e, "node password", "node password USER [--password-file FILE] [--agents AGENTS] [--dry-run] [--json]", false, true)
			pwFile := fs.String("password-file", "", "a file holding the user's password (mode 0600); else $OCX_PASSWORD")
			pos, _, err := parseArgs(fs, args, oneArg("USER"))
			if err != nil {
				return err
			}
			pw, err := passwordOf(*pwFile)
			if err != nil {
				return err
			}
			return c.act(e, func(n *node.Node) *node.Answer { return setup.NodePassword(ctx, n, pos[0], pw, c.dryRun) })
		}},
	}, args)
}

// secretOf reads a poke's secret from a file (mode 0600, as a password
// file), "" when none is named.
func secretOf(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	s, err := fossilio.ReadPasswordFile(file)
	if err != nil {
		return "", errors.New("--poke-secret-file: " + err.Error())
	}
	return s, nil
}

// passwordOf reads a password from a file (mode 0600), else $OCX_PASSWORD.
func passwordOf(file string) (string, error) {
	if file != "" {
		pw, err := fossilio.ReadPasswordFile(file)
		if err != nil {
			return "", errors.New("--password-file: " + err.Error())
		}
		return pw, nil
	}
	return os.Getenv("OCX_PASSWORD"), nil
}
