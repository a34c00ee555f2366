package runner

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/ocx-go/ocx/host/relay"
)

// CLIRetries bounds how often an agent CLI tries a failing request to the
// model again (claude's CLAUDE_CODE_MAX_RETRIES, codex's provider
// retries): a model that keeps failing fails the turn within seconds, as
// the native runner's does (--retries).
const CLIRetries = 2

// ModelRelay carries a CLI's model requests from a port on 127.0.0.1, in
// the sandbox's own network, to the node's model socket beside the MCP
// socket (D48), for the turn's length: the CLI then speaks TCP to a base
// URL, as it must, and still reaches no network and holds no key of the
// node's. The relay is keyed (D79): it carries only the requests holding
// its key (Keyed.Key), made for this turn alone, which the runner gives
// its CLI as the API key the CLI sends (claude's ANTHROPIC_API_KEY,
// codex's provider's env_key), in its environment. Where the sandbox shares the host's network its loopback is
// the host's, and without the key any user or agent of the host could
// spend this session's model. nil, and why, when the node serves no model
// here (no socket); the runner then runs the CLI with its own login, if
// it has one.
func ModelRelay(env Env, stderr io.Writer) (*relay.Keyed, error) {
	sock := env.ModelSocket()
	if sock == "" {
		return nil, fmt.Errorf("the node serves no tools or model here ($%s is not set)", envMCPSocket)
	}
	if _, err := os.Stat(sock); err != nil {
		return nil, fmt.Errorf("the node serves no model here (%s: %v)", sock, err)
	}
	key, err := relay.NewKey()
	if err != nil {
		return nil, Failf("the relay to the node's model: %v", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := relay.ListenKeyed(sock, key, log)
	if err != nil {
		return nil, Failf("the relay to the node's model: %v", err)
	}
	return r, nil
}

// WithEnv returns env with each KEY=VALUE of kvs set, replacing KEY's
// value, and every variable named by drop (a name, or a prefix ending in
// "*") removed.
func WithEnv(env []string, drop []string, kvs ...string) []string {
	set := map[string]bool{}
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(env)+len(kvs))
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if set[k] || dropped(k, drop) {
			continue
		}
		out = append(out, e)
	}
	return append(out, kvs...)
}

func dropped(k string, drop []string) bool {
	for _, d := range drop {
		if p, ok := strings.CutSuffix(d, "*"); ok && strings.HasPrefix(k, p) || d == k {
			return true
		}
	}
	return false
}
