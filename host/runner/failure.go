package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/unixhost"
)

// Exit codes of a runner (docs/runners.md). The session posts what the
// runner printed either way, and adds the exit when it is not 0.
const (
	// ExitAnswered: the runner printed the model's answer.
	ExitAnswered = 0
	// ExitFailed: the turn failed; the runner printed its failure note.
	ExitFailed = 1
	// ExitUsage: the runner was run wrongly (a flag); it printed the
	// failure note too.
	ExitUsage = 2
)

// maxWhatLen bounds what a failure note says.
const maxWhatLen = 400

// Failure is a turn's failure as a runner says it to the record: one short
// line, no stack trace, no key.
type Failure struct {
	What string
	// Usage marks a runner run wrongly, which exits ExitUsage.
	Usage bool
}

func (f *Failure) Error() string { return f.What }

// Failf is a Failure saying what failed, formatted as fmt.Sprintf does.
func Failf(format string, args ...any) error {
	return &Failure{What: fmt.Sprintf(format, args...)}
}

// Note is the failure note for err: "The runner failed: WHAT." on one
// line, WHAT being err's text with its white space runs made one space,
// cut to a few hundred bytes.
func Note(err error) string {
	what := strings.Join(strings.Fields(err.Error()), " ")
	what = strings.TrimRight(what, ".")
	if len(what) > maxWhatLen {
		cut := maxWhatLen
		for cut > 0 && !isRuneStart(what[cut]) {
			cut--
		}
		what = what[:cut] + "…"
	}
	if what == "" {
		what = "no reason given"
	}
	return "The runner failed: " + what + "."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Finish ends a turn: with err nil it prints answer (and a newline when it
// has none) and returns ExitAnswered; otherwise it prints err's failure
// note and returns ExitFailed (ExitUsage for a Failure with Usage). A
// runner's main passes what Finish returns to os.Exit.
func Finish(stdout io.Writer, answer string, err error) int {
	if err != nil {
		fmt.Fprintln(stdout, Note(err))
		var f *Failure
		if errors.As(err, &f) && f.Usage {
			return ExitUsage
		}
		return ExitFailed
	}
	if !strings.HasSuffix(answer, "\n") {
		answer += "\n"
	}
	io.WriteString(stdout, answer)
	return ExitAnswered
}

// Main is a runner's main: run is given the process's arguments and
// streams, with a context that ends on TERM or an interrupt, and its code
// is the process's exit.
func Main(run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int) {
	ctx, stop := signal.NotifyContext(context.Background(), unixhost.OSSignal(host.SIGTERM), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
