package remote

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ocx-go/ocx/fossilio"
)

// Keeper keeps one project's clone on a node on another host: its pull
// brings in what the server holds, as the node user (the clone remembers
// its password), then has the server vouch for each artifact that came,
// so that the clone's readers see it (fossilio's vouched clone). It is
// safe for concurrent use: pulls of one clone run one at a time.
type Keeper struct {
	// Project names the project in errors and logs; Clone is its clone.
	Project string
	Clone   string
	// Fossil runs fossil pull as the node user.
	Fossil *fossilio.Fossil
	// Client asks the server for receipts.
	Client *Client
	Log    *slog.Logger

	mu sync.Mutex
	// unknown are the hashes the server said it does not hold, each
	// logged once.
	unknown map[string]bool
	// code is the clone's project code, read once.
	code string
}

// ProjectCode is the server's project code, as its receipt page says it:
// what a clone is made with (its shared secret) before the clone exists.
func (c *Client) ProjectCode(ctx context.Context) (string, error) {
	a, err := c.Receipts(ctx, nil)
	if err != nil {
		return "", err
	}
	return a.Project, nil
}

// Pulled is what one pull brought.
type Pulled struct {
	// Through is the clone's newest receipt, vouched for.
	Through int64
	// Vouched counts the artifacts the server vouched for; Unknown those
	// it said it does not hold (kept with no sender: never trusted).
	Vouched, Unknown int
	// Pull and Vouch are how long the pull and the vouching took.
	Pull, Vouch time.Duration
}

// Pull pulls the clone and has the server vouch for what came. An error
// leaves the clone's readers where they were: what came and was not
// vouched for has not arrived for them, and the next pull vouches for it
// (D72: the node waits and asks again, it never guesses).
func (k *Keeper) Pull(ctx context.Context) (Pulled, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t0 := time.Now()
	if err := k.Fossil.Pull(ctx, k.Clone); err != nil {
		return Pulled{}, fmt.Errorf("pull %s: %w", k.Project, err)
	}
	pull := time.Since(t0)
	p, err := k.vouch(ctx)
	p.Pull, p.Vouch = pull, time.Since(t0)-pull
	return p, err
}

// Vouch has the server vouch for what the clone received and was not
// vouched for yet, without pulling; the server's users are read again.
func (k *Keeper) Vouch(ctx context.Context) (Pulled, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.vouch(ctx)
}

func (k *Keeper) vouch(ctx context.Context) (Pulled, error) {
	admin := &fossilio.Admin{Repository: k.Clone, Fossil: k.Fossil}
	q, err := admin.Unvouched(ctx)
	if err != nil {
		return Pulled{}, fmt.Errorf("vouch for %s: %w", k.Project, err)
	}
	// Each sender the clone knows is asked of again, by an artifact it
	// sent: the server names the users its receipts name alone (D81), and
	// a standing is read as the server's now.
	asked := slices.Clone(q.Hashes)
	for _, s := range q.Senders {
		asked = append(asked, s.Hash)
	}
	a, err := k.Client.Receipts(ctx, asked)
	if err != nil {
		return Pulled{}, fmt.Errorf("vouch for %s: %w", k.Project, err)
	}
	rs, standings, err := fromAnswer(asked, a)
	if err != nil {
		return Pulled{}, fmt.Errorf("vouch for %s: %w", k.Project, err)
	}
	rs = rs[:len(q.Hashes)]
	if k.code == "" {
		r, err := fossilio.OpenNode(k.Clone, nil)
		if err != nil {
			return Pulled{}, fmt.Errorf("vouch for %s: %w", k.Project, err)
		}
		k.code, err = r.ProjectCode(ctx)
		r.Close()
		if err != nil {
			return Pulled{}, fmt.Errorf("vouch for %s: %w", k.Project, err)
		}
	}
	if a.Project != k.code {
		return Pulled{}, fmt.Errorf("vouch for %s: %w: the server holds project %s, the clone %s is of project %s", k.Project, ErrRefused, a.Project, k.Clone, k.code)
	}
	p := Pulled{Through: q.Through}
	for _, rc := range rs {
		if rc.Known {
			p.Vouched++
			continue
		}
		p.Unknown++
		if k.unknown == nil {
			k.unknown = map[string]bool{}
		}
		if !k.unknown[rc.Hash] && k.Log != nil {
			k.unknown[rc.Hash] = true
			k.Log.Warn("the server does not vouch for an artifact the clone holds: its sender is unknown, and nothing it says is acted on",
				slog.String("project", k.Project), slog.String("hash", rc.Hash))
		}
	}
	if err := admin.StoreVouched(ctx, q.Through, rs, standings); err != nil {
		return Pulled{}, fmt.Errorf("vouch for %s: %w", k.Project, err)
	}
	return p, nil
}
