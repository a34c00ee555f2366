package messages

import (
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ocx-go/ocx/messages/modelapi"
)

// TestLedgerProperties drives the meter's core through random
// interleavings of requests entering, reserving (asking any bound, or
// none, as the meter does before a body is read), keeping what their
// body asks once read (any bound, any least), being replied to (an
// output within what was granted, as an API holds to max_tokens, and any
// input) or refused by the proxy, under a limit or none. Always: no more than MaxInFlight under way; the output
// counted and the grants under way never pass the limit; a grant is
// given only while the count and the grants stay under the limit, and is
// what was asked unless it is capped to what was left; a request waits
// only while another is under way that will give back (no request waits
// for nothing); once spent, every request is refused and counted.
func TestLedgerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := &Ledger{Limit: rapid.SampledFrom([]uint64{0, 1, 100, 2000, 100000, 1000000}).Draw(t, "limit")}
		type req struct {
			reserved, bounded bool
			grant             uint64
		}
		var entered []req
		refused := uint64(0)
		check := func() {
			if l.InFlight != len(entered) || l.InFlight > MaxInFlight {
				t.Fatalf("%d in flight, %d entered", l.InFlight, len(entered))
			}
			var held uint64
			for _, r := range entered {
				if r.reserved && l.Limit > 0 {
					held += r.grant
				}
			}
			if held != l.Reserved {
				t.Fatalf("reserved %d, the grants under way %d", l.Reserved, held)
			}
			if l.Limit > 0 && l.Count.Output+l.Reserved > l.Limit {
				t.Fatalf("output %d and reserved %d pass the limit %d", l.Count.Output, l.Reserved, l.Limit)
			}
			if l.Count.Refused != refused {
				t.Fatalf("counted %d refused, %d were", l.Count.Refused, refused)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"enter": func(t *rapid.T) {
				switch v := l.Enter(); v {
				case LedgerGo:
					entered = append(entered, req{})
				case LedgerWait:
					if l.InFlight < MaxInFlight {
						t.Fatalf("a request waits with %d in flight", l.InFlight)
					}
				case LedgerSpent:
					if l.Reached == "" {
						t.Fatal("refused as spent, with nothing reached")
					}
					refused++
				}
			},
			"reserve": func(t *rapid.T) {
				i := -1
				for j, r := range entered {
					if !r.reserved {
						i = j
					}
				}
				if i < 0 {
					t.Skip("nothing entered unreserved")
				}
				b := modelapi.OutputBound{Asked: rapid.SampledFrom([]uint64{0, 1, 16, 500, 4096, 128000}).Draw(t, "asked"),
					Least: rapid.SampledFrom([]uint64{1, 16, 1025}).Draw(t, "least")}
				before, left, reserved := l.Count.Total(), l.Left(), l.Reserved
				grant, capped, v := l.Reserve(b)
				switch v {
				case LedgerGo:
					entered[i] = req{reserved: true, grant: grant}
					if l.Limit == 0 {
						if capped || grant != b.Asked {
							t.Fatalf("no limit, yet %d asked was granted %d (capped %v)", b.Asked, grant, capped)
						}
						return
					}
					if before+reserved+grant > l.Limit || grant == 0 {
						t.Fatalf("granted %d with %d counted and %d reserved under %d", grant, before, reserved, l.Limit)
					}
					if capped != (b.Ask() > left) || !capped && grant != b.Ask() || capped && grant != left {
						t.Fatalf("asked %d with %d left: granted %d, capped %v", b.Asked, left, grant, capped)
					}
				case LedgerWait:
					if reserved == 0 {
						t.Fatal("a request waits while nothing under way will give back")
					}
				case LedgerSpent:
					refused++
					entered = append(entered[:i], entered[i+1:]...)
					l.Leave()
					if l.Reached == "" {
						t.Fatal("spent, with nothing reached")
					}
				}
			},
			"bound": func(t *rapid.T) {
				i := -1
				for j, r := range entered {
					if r.reserved && !r.bounded {
						i = j
					}
				}
				if i < 0 {
					t.Skip("nothing reserved unbounded")
				}
				grant := entered[i].grant
				b := modelapi.OutputBound{Asked: rapid.SampledFrom([]uint64{0, 1, 16, 500, 4096, 128000, 200000}).Draw(t, "body asks"),
					Least: rapid.SampledFrom([]uint64{1, 16, 1025}).Draw(t, "body's least")}
				reserved := l.Reserved
				kept, v := l.Bound(grant, b)
				if l.Limit == 0 {
					if kept != grant || v != LedgerGo {
						t.Fatalf("no limit, yet the grant %d kept %d: %s", grant, kept, v)
					}
					entered[i].bounded = true
					return
				}
				if v != LedgerGo && (b.Ask() <= grant || grant >= b.Least) {
					t.Fatalf("the grant %d refused (%s) for a body asking %d, least %d", grant, v, b.Ask(), b.Least)
				}
				switch v {
				case LedgerGo:
					if kept != min(b.Ask(), grant) || l.Reserved != reserved-(grant-kept) {
						t.Fatalf("the grant %d for a body asking %d kept %d; reserved %d, was %d", grant, b.Ask(), kept, l.Reserved, reserved)
					}
					entered[i].bounded, entered[i].grant = true, kept
				case LedgerWait, LedgerSpent:
					if kept != 0 || l.Reserved != reserved-grant {
						t.Fatalf("refused (%s), yet kept %d; reserved %d, was %d", v, kept, l.Reserved, reserved)
					}
					if v == LedgerWait && l.Reserved == 0 && l.Left() < b.Least {
						t.Fatal("told to try again while nothing under way will give back and too little is left")
					}
					if v == LedgerSpent {
						refused++
						if l.Reached == "" {
							t.Fatal("spent, with nothing reached")
						}
					}
					entered = append(entered[:i], entered[i+1:]...)
					l.Leave()
				}
			},
			"reply": func(t *rapid.T) {
				if len(entered) == 0 {
					t.Skip("nothing under way")
				}
				i := rapid.IntRange(0, len(entered)-1).Draw(t, "which")
				r := entered[i]
				entered = append(entered[:i], entered[i+1:]...)
				if !r.reserved {
					l.Leave() // refused by the proxy: another model, a 404
					return
				}
				out := r.grant
				if l.Limit == 0 || out == 0 {
					out = 5000
				}
				rep := LedgerReply{Forwarded: rapid.Bool().Draw(t, "forwarded"), OK: true, Whole: rapid.IntRange(0, 9).Draw(t, "whole") > 0,
					Tokens: modelapi.Tokens{Input: rapid.Uint64Range(0, 3000).Draw(t, "input"), Output: rapid.Uint64Range(0, out).Draw(t, "output")}}
				wasReached := l.Reached
				l.Settle(r.grant, rep)
				if wasReached != "" && l.Reached != wasReached {
					t.Fatalf("the reason the budget is spent changed: %q to %q", wasReached, l.Reached)
				}
			},
			"": func(t *rapid.T) { check() },
		})
		// Once spent, nothing more is let in.
		if l.Reached != "" {
			if v := l.Enter(); v != LedgerSpent {
				t.Fatalf("spent (%s), yet a request enters: %s", l.Reached, v)
			}
		}
	})
}

// TestLedgerHundredAtOnce: 100 requests asking 4096 tokens under a limit
// of 2000, each API reply writing all it was granted and reading 10: one
// is forwarded, capped to 2000; the others wait while it is under way and
// are refused once it has spent the budget; the count passes the limit
// by the 10 it read, never by an output.
func TestLedgerHundredAtOnce(t *testing.T) {
	l := &Ledger{Limit: 2000}
	var grants []uint64
	waited, spent := 0, 0
	for range 100 {
		switch l.Enter() {
		case LedgerWait:
			waited++
			continue
		case LedgerSpent:
			spent++
			continue
		}
		switch g, capped, v := l.Reserve(modelapi.OutputBound{Least: 1}); v {
		case LedgerGo:
			if !capped || g != 2000 {
				t.Fatalf("granted %d (capped %v)", g, capped)
			}
			if g, v = l.Bound(g, modelapi.OutputBound{Asked: 4096, Least: 1}); g != 2000 || v != LedgerGo {
				t.Fatalf("the body asking 4096 kept %d: %s", g, v)
			}
			grants = append(grants, g)
		case LedgerWait:
			waited++
			l.Leave()
		default:
			t.Fatalf("refused while the first is under way: %s", l.Reached)
		}
	}
	for _, g := range grants {
		l.Settle(g, LedgerReply{Forwarded: true, OK: true, Whole: true, Tokens: modelapi.Tokens{Input: 10, Output: g}})
	}
	for range 100 - len(grants) {
		if l.Enter() != LedgerSpent {
			t.Fatal("a request entered past the budget")
		}
	}
	if len(grants) != 1 || l.Count.Total() != 2010 || l.Count.Refused != uint64(100-len(grants)) || !strings.Contains(l.Reached, "2010 tokens") {
		t.Fatalf("%d forwarded, count %+v, %q (waited %d)", len(grants), l.Count, l.Reached, waited)
	}
}

// TestLedgerTooLittleLeft: what is left below the least a request may ask
// (Responses' 16) spends the budget once nothing is under way, and says
// so.
func TestLedgerTooLittleLeft(t *testing.T) {
	l := &Ledger{Limit: 100}
	l.Enter()
	g, _, _ := l.Reserve(modelapi.OutputBound{Asked: 90, Least: 16})
	l.Enter()
	if _, _, v := l.Reserve(modelapi.OutputBound{Least: 16}); v != LedgerWait {
		t.Fatalf("10 left while 90 are reserved: %s", v)
	}
	l.Leave()
	l.Settle(g, LedgerReply{Forwarded: true, OK: true, Whole: true, Tokens: modelapi.Tokens{Input: 0, Output: 90}})
	l.Enter()
	if _, _, v := l.Reserve(modelapi.OutputBound{Least: 16}); v != LedgerSpent || !strings.Contains(l.Reached, "the 10 left are fewer than the least a request may ask (16)") {
		t.Fatalf("%s: %q", v, l.Reached)
	}
	if s := strconv.FormatUint(l.Count.Refused, 10); s != "1" {
		t.Fatalf("refused %s", s)
	}
}

// TestLedgerBoundKeepsWhatTheBodyAsks: a request reserves MaxOutput, or
// what is left, before its body is read; once read, it keeps what the
// body asks and gives back the rest, which another request takes at
// once. A body whose thinking needs more than its capped grant is
// refused: to try again while another holds a grant, as spent once
// nothing is under way.
func TestLedgerBoundKeepsWhatTheBodyAsks(t *testing.T) {
	l := &Ledger{Limit: 10000}
	l.Enter()
	g, capped, _ := l.Reserve(modelapi.OutputBound{Least: 1})
	if g != 10000 || !capped {
		t.Fatalf("reserved %d, capped %v", g, capped)
	}
	l.Enter()
	if _, _, v := l.Reserve(modelapi.OutputBound{Least: 1}); v != LedgerWait {
		t.Fatalf("nothing left, another under way: %s", v)
	}
	if g, v := l.Bound(g, modelapi.OutputBound{Asked: 4096, Least: 1}); g != 4096 || v != LedgerGo || l.Reserved != 4096 {
		t.Fatalf("kept %d (%s), reserved %d", g, v, l.Reserved)
	}
	g2, _, v := l.Reserve(modelapi.OutputBound{Least: 1})
	if g2 != 5904 || v != LedgerGo {
		t.Fatalf("the second reserved %d: %s", g2, v)
	}
	// Its body asks 8000 with thinking enabled: capped to 5904, enough.
	if g2, v = l.Bound(g2, modelapi.OutputBound{Asked: 8000, Least: 1025}); g2 != 5904 || v != LedgerGo {
		t.Fatalf("kept %d: %s", g2, v)
	}
	l.Settle(g2, LedgerReply{Forwarded: true, OK: true, Whole: true, Tokens: modelapi.Tokens{Output: 5904}})
	l.Enter()
	g3, _, _ := l.Reserve(modelapi.OutputBound{Least: 1}) // 10000-5904-4096: nothing left
	if g3 != 0 {
		t.Fatalf("reserved %d with nothing left", g3)
	}
	l.Settle(g, LedgerReply{Forwarded: true, OK: true, Whole: true, Tokens: modelapi.Tokens{Output: 3400}})
	g3, _, _ = l.Reserve(modelapi.OutputBound{Least: 1}) // 696 left
	l.Enter()
	g4, _, _ := l.Reserve(modelapi.OutputBound{Least: 1}) // none left
	if g3 != 696 || g4 != 0 {
		t.Fatalf("reserved %d and %d", g3, g4)
	}
	if g3, v = l.Bound(g3, modelapi.OutputBound{Asked: 2000, Least: 1025}); g3 != 0 || v != LedgerSpent || l.Count.Refused != 1 ||
		!strings.Contains(l.Reached, "the 696 left are fewer than the least a request may ask (1025)") {
		t.Fatalf("thinking under 696 left: kept %d, %s, %q", g3, v, l.Reached)
	}
}
