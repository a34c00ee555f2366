package mcp

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/ocx-go/ocx/cmd/internal/node"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/daemonclient"
	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/unixhost"
	sessusage "github.com/ocx-go/ocx/host/usage"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
	"github.com/ocx-go/ocx/messages/pipe"
)

// Meter is what the model proxy's count needs (D50): the launch the
// session serves and its limits.tokens (0: none).
type Meter struct {
	Launch string
	Tokens uint64
}

// budgetResend is how often a spent budget is told the daemon again while
// the session runs: a line is lost when no daemon reads the pipe, and one
// that comes back must hear it.
const budgetResend = 5 * time.Second

// budgetTurnWait bounds how long the daemon's word waits for the turn
// that spent the budget to end. The turn goes on without the model (its
// next request is refused) and ends as a turn does, its answer or its
// runner's failure note on the record; then the session is stopped. A
// turn that does not end (a runner that ignores the refusal) is not
// waited for past it. The turn file is the session's to write: holding
// it only delays its own stop, by this much at most, and spends nothing.
const budgetTurnWait = 30 * time.Second

// meterModel wraps the session's model proxy h in the node's count of its
// model (model.Meter): after each reply the count is written to
// AGENTS/LOGIN/mcp/PROJECT/usage.json (its sandbox sees it read-only;
// the status and the daemon's end note read it), and once the budget is
// spent the daemon is told on its pipe (`budget LOGIN PROJECT LAUNCH
// tokens USED`), then again every budgetResend until ctx ends (the
// session is gone), so that a daemon that was not reading hears it.
func meterModel(ctx context.Context, log *slog.Logger, l host.Layout, ws host.Workspace, key messages.WorkspaceKey, f Meter, h http.Handler) http.Handler {
	launch, limit := f.Launch, f.Tokens
	if launch != "" && messages.ValidateHash(launch) != nil {
		log.Warn("the launch named is not a full hash; the model's count names none", slog.String("launch", launch))
		launch = ""
	}
	if limit > modelapi.MaxTokens {
		limit = modelapi.MaxTokens
	}
	root, err := unixhost.OpenRoot(l.Root())
	if err != nil {
		log.Warn("the model's count is not kept", slog.String("error", err.Error()))
	}
	var once sync.Once
	changed := func(c messages.ModelCount, reached string) {
		if root != nil {
			u := &messages.ModelUsage{Launch: launch, Count: c, Limit: limit, Reached: reached, Updated: time.Now().UTC()}
			if err := sessusage.WriteModel(root, ws, u); err != nil {
				log.Warn("the model's count is not written", slog.String("error", err.Error()))
			}
		}
		if reached != "" && launch != "" {
			once.Do(func() {
				go tellBudget(ctx, log, l, ws, pipe.BudgetLine{Login: key.Login, Project: key.Project, Launch: launch, Limit: messages.LimitTokens, Used: c.Total()})
			})
		}
	}
	m := model.NewMeter(limit, changed, log)
	changed(messages.ModelCount{}, "") // a fresh count: the session's own, not an earlier one's
	if limit > 0 {
		log.Info("model tokens limited", slog.Uint64("tokens", limit), slog.String("launch", launch))
	}
	return m.Handler(h)
}

// tellBudget hands the daemon the line once the session's turn is over
// (its turn file gone, or budgetTurnWait past), and again every
// budgetResend, until ctx ends.
func tellBudget(ctx context.Context, log *slog.Logger, l host.Layout, ws host.Workspace, line pipe.BudgetLine) {
	if root, err := unixhost.OpenRoot(l.Root()); err == nil {
		deadline := time.Now().Add(budgetTurnWait)
		for time.Now().Before(deadline) && root.IsRegular(node.TurnFile(ws)) == nil {
			select {
			case <-ctx.Done():
				root.Close()
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		root.Close()
	}
	for {
		if err := daemonclient.Send(l, []pipe.Line{line}); err != nil {
			log.Warn("the daemon is not told the budget is spent; trying again", slog.String("line", line.String()), slog.String("error", err.Error()))
		} else {
			log.Info("the daemon is told the budget is spent", slog.String("line", line.String()))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(budgetResend):
		}
	}
}
