package node

import (
	"context"
	"fmt"
)

// step is one thing an action does, in its order.
type step struct {
	// Text is the step as a dry run says it, after "would "; empty for a
	// step a dry run does not name.
	Text string
	// Do is its effect, which only a real run runs: it logs what it did
	// on the answer and returns why it could not do it.
	Do func(ctx context.Context, a *Answer) error
	// Defer says Do runs when the plan ends, once the executor has
	// reached it, even if a later step fails (as Go's defer does).
	Defer bool
	// Said, on a step without Text or Do, is a fact both runs state.
	Said string
}

// Plan is an action's writes and host steps, in order, built by pure code
// from what the action read: a dry run prints it, a real run executes it
// (execute, the one executor).
type Plan struct {
	Steps []step
}

// Add appends a step.
func (p *Plan) Add(text string, do func(ctx context.Context, a *Answer) error) {
	p.Steps = append(p.Steps, step{Text: text, Do: do})
}

// Say appends a fact both runs state, in its place among the steps.
func (p *Plan) Say(format string, args ...any) {
	p.Steps = append(p.Steps, step{Said: fmt.Sprintf(format, args...)})
}

// Deferred appends a step whose effect runs when the plan ends, once the
// executor has reached it; its error is not the plan's.
func (p *Plan) Deferred(do func(ctx context.Context, a *Answer)) {
	p.Steps = append(p.Steps, step{Defer: true, Do: func(ctx context.Context, a *Answer) error {
		do(ctx, a)
		return nil
	}})
}

// Texts are the steps a dry run says it would take, without "would "
// (the facts it states aside).
func (p Plan) Texts() []string {
	var out []string
	for _, s := range p.Steps {
		if s.Text != "" {
			out = append(out, s.Text)
		}
	}
	return out
}

// Execute runs a plan on the answer: a dry run logs each step's text as
// what it would do; a real run runs each effect in order and stops at the
// first that fails, returning why.
func Execute(ctx context.Context, a *Answer, p Plan) error {
	var later []step
	defer func() {
		for i := len(later) - 1; i >= 0; i-- {
			later[i].Do(ctx, a)
		}
	}()
	for _, s := range p.Steps {
		if s.Said != "" {
			a.Logf("%s", s.Said)
			continue
		}
		if a.DryRun {
			if s.Text != "" {
				a.Would("%s", s.Text)
			}
			continue
		}
		if s.Do == nil {
			continue
		}
		if s.Defer {
			later = append(later, s)
			continue
		}
		if err := s.Do(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// Executed is an action's answer once its plan ran: why planning refused
// (err), or why the plan stopped, or none.
func Executed(ctx context.Context, a *Answer, p Plan, err error) *Answer {
	if err != nil {
		return a.Stop(err)
	}
	return a.Stop(Execute(ctx, a, p))
}
