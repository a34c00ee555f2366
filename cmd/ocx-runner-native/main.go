// Command ocx-runner-native is OCX's own agent loop (D9, docs/runners.md
// "native"): one turn of an llm session, run in the session's sandbox as
// `ocx-runner-native --model MODEL` with the turn's line on standard
// input. It talks to the node's model through the proxy beside the MCP
// socket (which holds the key, never the runner), gives the model the
// node's tools, runs the tool calls it asks for over MCP, and prints the
// model's last answer.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ocx-go/ocx/host/model"
	"github.com/ocx-go/ocx/host/runner"
	"github.com/ocx-go/ocx/messages"
	"github.com/ocx-go/ocx/messages/modelapi"
)

// runnerName is this runner's name: its conversations are its own.
const runnerName = "native"

type flags struct {
	model     string
	toolCalls int
	timeout   time.Duration
	retries   int
	maxWait   time.Duration
	maxTokens int
	wait      time.Duration
}

func main() {
	runner.Main(func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		return run(ctx, args, stdin, stdout, stderr, os.Getenv)
	})
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("ocx-runner-native", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.model, "model", "", "the model's name, as the API knows it (required)")
	fs.IntVar(&f.toolCalls, "tool-calls", 8, "the most tool calls the model may make in one turn")
	fs.DurationVar(&f.timeout, "timeout", 120*time.Second, "how long one request to the model may take")
	fs.IntVar(&f.retries, "retries", 3, "how many times a request refused with 429 is tried again")
	fs.DurationVar(&f.maxWait, "max-wait", 60*time.Second, "the longest Retry-After of a 429 the runner waits for")
	fs.IntVar(&f.maxTokens, "max-tokens", 4096, "the most tokens one reply may hold (the anthropic API's max_tokens)")
	fs.DurationVar(&f.wait, "wait", 5*time.Second, "how long to wait for the node's MCP socket")
	if err := fs.Parse(args); err != nil {
		return f, &runner.Failure{What: err.Error(), Usage: true}
	}
	switch {
	case fs.NArg() > 0:
		return f, &runner.Failure{What: fmt.Sprintf("it takes no argument (%q)", fs.Arg(0)), Usage: true}
	case f.model == "":
		return f, &runner.Failure{What: "--model MODEL is missing", Usage: true}
	case f.toolCalls < 0 || f.retries < 0 || f.timeout <= 0 || f.maxWait < 0 || f.maxTokens <= 0:
		return f, &runner.Failure{What: "--tool-calls, --retries, --timeout, --max-wait and --max-tokens take positive values", Usage: true}
	}
	return f, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return runner.Finish(stdout, "", err)
	}
	in, err := runner.ReadInput(stdin)
	if err != nil {
		return runner.Finish(stdout, "", err)
	}
	logf := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		fmt.Fprintln(stderr, "ocx-runner-native: "+oneLine(line, 2000))
	}
	env := runner.EnvOf(getenv)
	var used usage
	answer, err := turn(ctx, f, in, env, logf, &used)
	if err != nil {
		logf("turn on %s failed: %v", in.Post, err)
	}
	if used.replies > 0 {
		// What the replies said, failed turn or not: the tokens were spent.
		if rerr := runner.ReportUsage(env, messages.RunnerReport{Tokens: used.t}); rerr != nil {
			logf("%v", rerr)
		}
	}
	return runner.Finish(stdout, answer, err)
}

// oneLine makes s one log line of at most max bytes.
func oneLine(s string, max int) string {
	s = strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// history is the conversation's state in the store: the API it was held
// with and its messages in that API's shape.
type history struct {
	API      string            `json:"api"`
	Messages []json.RawMessage `json:"messages"`
}

// usage sums what the turn's replies said they used (D50): the runner's
// own report, beside the node's count at its proxy.
type usage struct {
	t       modelapi.Tokens
	replies int
}

func (u *usage) add(path string, body []byte) {
	if t, ok := modelapi.ParseUsage(modelapi.APIShapeOf(path), body); ok {
		u.t, u.replies = u.t.Plus(t), u.replies+1
	}
}

// turn answers one post, adding what each reply used to used.
func turn(ctx context.Context, f flags, in runner.Input, env runner.Env, logf func(string, ...any), used *usage) (string, error) {
	if env.MCPSocket == "" {
		return "", errNoModel
	}
	tools, err := runner.ConnectTools(ctx, env.MCPSocket, f.wait)
	if err != nil {
		return "", err
	}
	defer tools.Close()
	sock := env.ModelSocket()
	if !socketThere(ctx, sock) {
		return "", errNoModel
	}
	c := newClient(sock, f, logf)
	defer c.close()
	api, err := c.info(ctx)
	if err != nil {
		return "", err
	}
	fl, err := flavourOf(api)
	if err != nil {
		return "", err
	}
	store, err := runner.OpenStore(env.SessionDir, runnerName)
	if err != nil {
		return "", err
	}
	defer store.Close()
	conv, err := store.Load(in.Session)
	if err != nil {
		return "", err
	}
	h, turns, err := historyOf(conv, in.Session, api)
	if err != nil {
		return "", err
	}
	list, err := tools.List(ctx)
	if err != nil {
		return "", err
	}
	msgs := append(h.Messages, fl.user(in.Message(conv == nil)))
	p := params{Model: f.model, System: systemPrompt(in), MaxTokens: f.maxTokens}
	calls := 0
	for {
		body, err := fl.body(p, msgs, list)
		if err != nil {
			return "", runner.Failf("the request to the model: %v", err)
		}
		b, err := c.post(ctx, api.Paths()[0], fl.header, body)
		if err != nil {
			return "", err
		}
		used.add(api.Paths()[0], b)
		r, err := fl.parse(b)
		if err != nil {
			return "", err
		}
		msgs = append(msgs, r.Message)
		if len(r.Calls) == 0 {
			if strings.TrimSpace(r.Text) == "" {
				return "", runner.Failf("the model's answer is empty")
			}
			h.Messages = msgs
			if err := store.Save(in.Session, &runner.Conversation{Turns: turns + 1, State: mustJSON(h)}); err != nil {
				return "", err
			}
			return r.Text, nil
		}
		calls += len(r.Calls)
		if calls > f.toolCalls {
			return "", runner.Failf("the model made more than %d tool calls in one turn", f.toolCalls)
		}
		msgs = append(msgs, fl.results(r.Calls, callTools(ctx, tools, r.Calls, logf))...)
	}
}

// historyOf is the history conv keeps of session (nil: a new one, on api)
// and how many turns it held, refused when it was held on another API.
func historyOf(conv *runner.Conversation, session string, api model.API) (history, int, error) {
	h := history{API: string(api)}
	if conv == nil {
		return h, 0, nil
	}
	if err := json.Unmarshal(conv.State, &h); err != nil {
		return h, 0, runner.Failf("the conversation of %s does not read (%v)", session, err)
	}
	if h.API != string(api) {
		return h, 0, runner.Failf("the conversation of %s was held with the %s API, and the node now serves %s", session, h.API, api)
	}
	return h, conv.Turns, nil
}

// callTools runs the model's tool calls, in order, and returns their answers.
func callTools(ctx context.Context, tools *runner.Tools, calls []call, logf func(string, ...any)) []runner.Result {
	answers := make([]runner.Result, len(calls))
	for i, call := range calls {
		logf("tool call %s %s: %s", call.ID, call.Name, call.Input)
		res, err := tools.Call(ctx, call.Name, call.Input)
		if err != nil {
			// A call that did not reach its tool (an unknown name) is an
			// answer for the model to read, not the turn's end.
			res = runner.Result{Text: err.Error(), IsError: true}
		}
		tag := ""
		if res.IsError {
			tag = " (refused)"
		}
		logf("tool answer %s %s%s: %s", call.ID, call.Name, tag, res.Text)
		answers[i] = res
	}
	return answers
}

// socketThere says whether the model socket is there, waiting a moment:
// `ocx mcp start` binds it just after the MCP socket.
func socketThere(ctx context.Context, path string) bool {
	for i := 0; ; i++ {
		st, err := os.Stat(path)
		if err == nil {
			return st.Mode().Type() == os.ModeSocket
		}
		if !errors.Is(err, os.ErrNotExist) || i == 4 || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// systemPrompt tells the model where it is and how a session ends.
func systemPrompt(in runner.Input) string {
	return fmt.Sprintf(`You are %s, an agent of OCX working in a Fossil repository with people and other agents. You are in your session's check-out; each message you get is a post on a record, and what you answer is posted as your reply on that record.

Use the tools to act on the project (post, create, audit, push, stop); each answers with JSON saying what it did, or why it refused.

When the work your objective asks for is done, or cannot be done, end your answer with a report note, a fenced block of this shape:

`+"```json\n"+`{"ocx": "report", "outcome": "done", "summary": "what was done"}
`+"```"+`

with "outcome" "failed" when it could not be done. Without a report, your answer is a reply and the session waits for the next post.`, in.Login)
}
