package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages/protocol"
)

// TestRunBootTranscripts runs every testdata/runboot/*.txt: what the host
// reports at a start, a project at a time ("> project demo fresh" or
// "> project demo stale"), then its runs in the record's order ("> run R1
// started stop ended incare alive proc=N session=start", each word
// optional), and "> decide" prints what DecideRunBoot decides: each run
// restored (lost, and why), each watched, each project left waiting.
func TestRunBootTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "runboot", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no transcripts in testdata/runboot")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runBootTranscript(t, f)
		})
	}
}

func runBootTranscript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranscript()
	var projects []RunBootProject
	do := func(cmd string) ([]string, error) {
		f := strings.Fields(cmd)
		switch {
		case len(f) == 3 && f[0] == "project" && (f[2] == "fresh" || f[2] == "stale"):
			projects = append(projects, RunBootProject{Project: f[1], Fresh: f[2] == "fresh"})
		case len(f) >= 2 && f[0] == "run":
			if len(projects) == 0 {
				return nil, fmt.Errorf("a run before any project")
			}
			p := &projects[len(projects)-1]
			if !p.Fresh {
				return nil, fmt.Errorf("a stale project's runs are not read")
			}
			st := protocol.RunActorState{Facts: protocol.RunFacts{Hash: tr.hash(f[1]), Project: p.Project}}
			for _, w := range f[2:] {
				k, v, _ := strings.Cut(w, "=")
				switch k {
				case "started":
					st.StartedCounts, st.LaunchedAt = true, transcriptEpoch.Add(-time.Minute)
				case "stop":
					st.StopCounts = true
				case "ended":
					st.EndedCounts = true
				case "incare":
					st.InCare = true
				case "alive":
					st.Alive = true
				case "proc":
					n, err := strconv.Atoi(v)
					if err != nil {
						return nil, err
					}
					st.Proc = n
				case "session":
					st.Facts.Session, st.Facts.Deliveries = true, v
				default:
					return nil, fmt.Errorf("run: unknown word %q", w)
				}
			}
			p.Runs = append(p.Runs, st)
		case len(f) == 1 && f[0] == "decide":
			d := DecideRunBoot(projects)
			projects = nil
			var out []string
			for _, st := range d.Restore {
				out = append(out, tr.render("restore "+st.String()))
			}
			for _, st := range d.Watch {
				out = append(out, tr.render(fmt.Sprintf("watch %s process %d", protocol.RunAddr(st.Facts.Hash), st.Proc)))
			}
			for _, p := range d.Waiting {
				out = append(out, "wait for "+p+" to be fresh")
			}
			return out, nil
		default:
			return nil, fmt.Errorf("unknown command %q", cmd)
		}
		return nil, nil
	}
	playTranscript(t, path, data, func(cmd string, _ int) ([]string, error) { return do(cmd) })
}
