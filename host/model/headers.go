package model

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// What passes the proxy besides a request's body and a reply's (D79): an
// allow-list each way. A sandbox's request says how to read its body and
// which version of the API it speaks, nothing more: not whose account or
// project the node's key spends (OpenAI-Organization, OpenAI-Project),
// not a credential, not a beta that reaches past the request (Anthropic's
// files, MCP client, skills, code execution). A reply says its type and
// when to try again, nothing of the node's account (its organization,
// its cookies, its limits), and the key in none of it.

// requestHeaders are the headers of a sandbox's request forwarded to each
// API; every other is dropped, the query string too.
var requestHeaders = map[API][]string{
	Anthropic: {"Content-Type", "Accept", "Anthropic-Version", "Anthropic-Beta"},
	OpenAI:    {"Content-Type", "Accept"},
}

// anthropicBetas are the betas of Anthropic's API a request may ask, by
// name without their date: those that change how the model answers this
// request alone (what Claude Code 2.1 sends, and its kin). Any other is
// dropped.
var anthropicBetas = []string{
	"claude-code", "interleaved-thinking", "context-management", "per-turn-control",
	"mid-conversation-tool-changes", "thinking-token-count", "effort", "fine-grained-tool-streaming",
	"token-efficient-tools", "prompt-caching", "output-128k", "extended-cache-ttl", "context-1m",
}

// betaName is a beta's name and date: interleaved-thinking-2025-05-14,
// claude-code-20250219.
var betaName = regexp.MustCompile(`^([a-z0-9]+(?:-[a-z0-9]+)*?)-(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{8})$`)

// forwardedHeader is the header forwarded to api for a sandbox's request
// header in: the allowed headers alone, Anthropic-Beta with its allowed
// betas alone; dropped lists the betas left out.
func forwardedHeader(api API, in http.Header) (out http.Header, dropped []string) {
	out = http.Header{}
	for _, h := range requestHeaders[api] {
		vs := in.Values(h)
		if h == "Anthropic-Beta" {
			var kept []string
			for _, v := range vs {
				for b := range strings.SplitSeq(v, ",") {
					b = strings.TrimSpace(b)
					if m := betaName.FindStringSubmatch(b); m != nil && slices.Contains(anthropicBetas, m[1]) {
						kept = append(kept, b)
					} else if b != "" {
						dropped = append(dropped, b)
					}
				}
			}
			if len(kept) > 0 {
				out.Set(h, strings.Join(kept, ","))
			}
			continue
		}
		for _, v := range vs {
			out.Add(h, v)
		}
	}
	return out, dropped
}

// replyHeaders are the headers of an API's reply passed to the sandbox:
// what its client reads (the body's type and encoding, when to try again,
// the request's id for a report).
var replyHeaders = []string{"Content-Type", "Content-Encoding", "Retry-After", "Retry-After-Ms", "X-Should-Retry", "Request-Id", "X-Request-Id"}

// filterReply keeps the allowed headers of an API's reply alone, the key
// replaced by "[key]" in each.
func filterReply(h http.Header, key string) {
	for name, vs := range h {
		if !slices.ContainsFunc(replyHeaders, func(a string) bool { return http.CanonicalHeaderKey(a) == name }) {
			delete(h, name)
			continue
		}
		for i, v := range vs {
			vs[i] = redact(v, key)
		}
	}
}
