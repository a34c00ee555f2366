package modelapi

import (
	"fmt"
	"strconv"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// MaxTokens bounds a tokens limit and every count: a JSON number every
// reader reads exactly.
const MaxTokens = strictjson.MaxSafeInt

// Tokens counts what a model read and wrote. Input is every token it read,
// those read from a cache included; Cached is how many of them were.
// Input and Output are what a tokens limit counts (Total).
type Tokens struct {
	Input  uint64 `json:"input" why:"a count of tokens says how many the model read"`
	Output uint64 `json:"output" why:"a count of tokens says how many the model wrote"`
	Cached uint64 `json:"cached,omitempty"`
}

// Total is what a tokens limit counts: read and written.
func (t Tokens) Total() uint64 { return strictjson.AddCapped(t.Input, t.Output) }

// Plus is t and u added, each count capped at MaxTokens.
func (t Tokens) Plus(u Tokens) Tokens {
	return Tokens{Input: strictjson.AddCapped(t.Input, u.Input), Output: strictjson.AddCapped(t.Output, u.Output), Cached: strictjson.AddCapped(t.Cached, u.Cached)}
}

// IsZero says nothing was counted.
func (t Tokens) IsZero() bool { return t == Tokens{} }

// String renders "120 in (20 cached), 40 out".
func (t Tokens) String() string {
	s := strconv.FormatUint(t.Input, 10) + " in"
	if t.Cached > 0 {
		s += " (" + strconv.FormatUint(t.Cached, 10) + " cached)"
	}
	return s + ", " + strconv.FormatUint(t.Output, 10) + " out"
}

// ValidateAt checks each count is a safe JSON number and Cached is at most
// Input, naming the fields under f.
func (t Tokens) ValidateAt(f string) error {
	for k, n := range map[string]uint64{"input": t.Input, "output": t.Output, "cached": t.Cached} {
		if n > MaxTokens {
			return strictjson.FieldErr(strictjson.JoinField(f, k), strictjson.ErrInvalid, fmt.Sprintf("%d is past 2^53-1", n))
		}
	}
	if t.Cached > t.Input {
		return strictjson.FieldErr(strictjson.JoinField(f, "cached"), strictjson.ErrInvalid, fmt.Sprintf("%d is more than the %d tokens read: the cached are some of them", t.Cached, t.Input))
	}
	return nil
}
