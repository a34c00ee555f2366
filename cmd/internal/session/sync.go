package session

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/ocx-go/ocx/fossilio"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/relay"
	"github.com/ocx-go/ocx/host/unixhost"
)

// fossilProxyEnv names, in a turn's environment, the session's relay to
// the node's sync socket (http://127.0.0.1:PORT, D49): a turn that reaches
// the record itself passes it to fossil (`fossil pull --proxy
// "$OCX_FOSSIL_PROXY"`, push, sync), with the password its clone
// remembers, to its project's server and nowhere else.
const fossilProxyEnv = "OCX_FOSSIL_PROXY"

// syncLink is how a session under the daemon reaches its project's server:
// through the node's sync socket ($OCX_SYNC_SOCKET, bound into its
// sandbox), which forwards Fossil's sync requests to that one server and
// adds nothing (D49). The session's own reads and writes (fossilio.Client:
// a woken post, a reply, a ticket comment, a tag) dial the socket; the
// fossil command it runs (the pull at its start, a CI run's pull of a
// check-in its clone lacks) reaches it through a relay on 127.0.0.1 in the
// sandbox's own network namespace, as its --proxy. Either way the agent
// authenticates as itself, with the password its clone remembers; the
// sandbox needs no network.
type syncLink struct {
	sock  string
	relay *relay.Relay
}

// openSync waits for the node's sync socket (the daemon starts its server
// just after the session) and starts the relay to it.
func (s *session) openSync(ctx context.Context, sock string) (*syncLink, error) {
	c, err := unixhost.DialSocket(ctx, sock, mcpWait)
	if err != nil {
		return nil, fmt.Errorf("the node's sync socket ($%s): %w (D49)", host.SyncSocketEnv, err)
	}
	c.Close()
	r, err := relay.Listen(0, sock, s.log.With(keyEvent, "relay"))
	if err != nil {
		return nil, fmt.Errorf("the relay to the node's sync socket: %w", err)
	}
	return &syncLink{sock: sock, relay: r}, nil
}

// http is the HTTP client whose every request goes to the sync socket,
// whatever host its URL names (the node decides where it goes on).
func (l *syncLink) http() *http.Client {
	return &http.Client{
		Timeout: fossilio.DefaultHTTPTimeout,
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			// Once the socket was there (openSync), a dial is tried once:
			// the session's own retries (docs/session.md §8) wait between attempts,
			// and a socket gone for good costs them, not 10 s each.
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return unixhost.DialSocket(ctx, l.sock, 0)
			},
		},
	}
}

// proxy is the relay's URL, for fossil's --proxy and a turn's
// fossilProxyEnv.
func (l *syncLink) proxy() string { return l.relay.URL() }

func (l *syncLink) close() {
	if l != nil && l.relay != nil {
		l.relay.Close()
	}
}
