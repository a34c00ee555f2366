package daemon

import (
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/ocx-go/ocx/cmd/internal/answers"
	"github.com/ocx-go/ocx/cmd/internal/daemon/otherhosts"
	"github.com/ocx-go/ocx/cmd/internal/daemon/reaper"
	"github.com/ocx-go/ocx/cmd/internal/hookshell"
	"github.com/ocx-go/ocx/cmd/internal/runengine"
	"github.com/ocx-go/ocx/fossilio/noderepos"
	"github.com/ocx-go/ocx/host"
	"github.com/ocx-go/ocx/host/metrics"
	"github.com/ocx-go/ocx/host/procs"
	"github.com/ocx-go/ocx/host/reexeccheck"
	"github.com/ocx-go/ocx/host/unixhost"
	"github.com/ocx-go/ocx/messages"
)

// instance is one running ocxd: everything Run opened, to be closed in order.
type instance struct {
	opts options
	// stopProfile ends and writes the CPU profile (--cpu-profile); it is
	// called again, harmlessly, at the end of Run.
	stopProfile func()
	layout      host.Layout
	cfg         *messages.NodeConfig
	nodeJSON    []byte // node.json as cfg was read from it
	log         *slog.Logger
	logFile     *unixhost.LogFile
	root        *unixhost.Root
	lock        *unixhost.FileLock
	rel         *procs.Releases
	table       *unixhost.ProcTable
	procs       *procs.Table
	records     *records
	runs        *runengine.Engine
	reaper      *reaper.Reaper
	inputs      *inputs
	hooks       *hookshell.Watch
	sock        *answers.Socket // AGENTS/ocxd.sock while it is served
	// remote are the parts of nodes on other hosts (D72).
	remote *otherhosts.Parts
	// metrics are the daemon's counters and histograms (issue 44): the
	// tree's effects, the socket's answers and the pulls observed into
	// them, the gauges read from the socket's view at each scrape.
	metrics *metrics.Set
	// repos are the node's repositories, open once, as every part reads
	// them.
	repos *noderepos.Repos
	sys   *actor.ActorSystem
	node  *actor.PID

	// sigs receives the signals Run catches; Exec keeps HUP off it across
	// the exec.
	sigs chan os.Signal

	// execMu keeps a re-exec and the stop apart: once stopping is set, no
	// exec starts, and the stop waits for one under way.
	execMu   sync.Mutex
	stopping bool
	// stopAsked is set the moment a stop is asked (a signal, the caller's
	// context), before the stop waits for execMu: a re-exec under way
	// checks it last thing before the exec, which would carry the daemon
	// past its stop (the new image knows nothing of it).
	stopAsked atomic.Bool
	// execing is set from the last check of stopAsked to the exec: a stop
	// asked meanwhile cannot keep the old image, so it tells the new one
	// (AGENTS/ocxd.stopasked).
	execing atomic.Bool
	// settled takes the loop's word that it took settleSignal
	// (settleSignals).
	settled chan struct{}
	// probes asks the release's ocxd its hand-off version as soon as a
	// re-exec is asked for.
	probes reexeccheck.Early
}

// stepTimes are how long each step took since began, for the log: of a
// start from a hand-off, of a re-exec.
type stepTimes struct {
	began  time.Time
	stages []any
}

func (s *stepTimes) mark(name string) {
	s.stages = append(s.stages, slog.Duration(name, time.Since(s.began)))
}

// testDelay waits at a point of the re-exec's window for as long as the
// tests asked (Options.ReexecDelay), saying so in the log, so that a test
// can act inside the window for sure.
func (d *instance) testDelay(point string) {
	if d.opts.ReexecDelay <= 0 || d.opts.ReexecDelayAt != "" && !slices.Contains(strings.Split(d.opts.ReexecDelayAt, ","), point) {
		return
	}
	d.log.Info("re-exec: test delay", slog.String("point", point), slog.Duration("delay", d.opts.ReexecDelay))
	time.Sleep(d.opts.ReexecDelay)
}
