package runmsg

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

func triggerRun(process string) string {
	return "```json\n" + `{"ocx": 1, "kind": "run", "node": "lab-1", "objective": "CI.",
"process": {"user": "builder", "command": ["make", "test"]` + process + "}}\n```\n"
}

// TestRunOnReads reads process.on of both kinds, and round trips them.
func TestRunOnReads(t *testing.T) {
	for _, c := range []struct {
		process string
		want    RunOn
	}{
		{`, "on": {"checkin": ["trunk", "release-1"]}`, RunOn{Checkin: []string{"trunk", "release-1"}}},
		{`, "on": {"schedule": "*/5 * * * *"}`, RunOn{Schedule: "*/5 * * * *"}},
		{`, "on": {"schedule": "@daily"}`, RunOn{Schedule: "@daily"}},
	} {
		m, err := ReadMessage([]byte(triggerRun(c.process)))
		if err != nil {
			t.Fatalf("%s: %v", c.process, err)
		}
		r := m.(*Run)
		if r.Process.On == nil || strings.Join(r.Process.On.Checkin, ",") != strings.Join(c.want.Checkin, ",") || r.Process.On.Schedule != c.want.Schedule {
			t.Fatalf("%s: on %+v", c.process, r.Process.On)
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadMessage(enc)
		if err != nil {
			t.Fatalf("%s", enc)
		}
		if back.(*Run).Process.On.Kind() != c.want.Kind() {
			t.Fatalf("round trip %s", enc)
		}
	}
}

// TestRunOnRefused: each refusal of process.on names the field and why
// (row 2).
func TestRunOnRefused(t *testing.T) {
	for _, c := range []struct{ process, field, problem string }{
		{`, "on": {}`, "process.on", "neither checkin nor schedule"},
		{`, "on": []`, "process.on", ""},
		{`, "on": {"checkin": ["trunk"], "schedule": "* * * * *"}`, "process.on", "both checkin and schedule"},
		{`, "on": {"push": ["trunk"]}`, "process.on.push", "not a field"},
		{`, "on": {"checkin": []}`, "process.on.checkin", "at least one branch"},
		{`, "on": {"checkin": "trunk"}`, "process.on.checkin", ""},
		{`, "on": {"checkin": ["trunk", "trunk"]}`, "process.on.checkin[1]", "named twice"},
		{`, "on": {"schedule": ""}`, "process.on.schedule", "is empty"},
		{`, "on": {"schedule": "61 * * * *"}`, "process.on.schedule", `"61 * * * *" is not a cron schedule (five fields, UTC)`},
		{`, "on": {"schedule": "* * * *"}`, "process.on.schedule", "is not a cron schedule"},
		{`, "on": {"schedule": "* * * * * *"}`, "process.on.schedule", "is not a cron schedule"},
		{`, "on": {"schedule": "TZ=Europe/Paris * * * * *"}`, "process.on.schedule", "the schedule is UTC"},
		{`, "on": {"schedule": "@every 5m"}`, "process.on.schedule", "@every is a period"},
		{`, "on": {"schedule": 5}`, "process.on.schedule", ""},
		{`, "manual": true, "on": {"checkin": ["trunk"]}`, "process.on", "not both"},
		{`, "session": true, "on": {"checkin": ["trunk"]}`, "process.on", "runs to completion"},
	} {
		_, err := ReadMessage([]byte(triggerRun(c.process)))
		var mm *MalformedMessage
		if !errors.As(err, &mm) {
			t.Fatalf("%s: %v, want a malformed run", c.process, err)
		}
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%s: %v (field %q), want %s: ...%s", c.process, err, fe.Field, c.field, c.problem)
		}
	}
}

// TestScheduleNext: the next minute is UTC, whatever zone t is in.
func TestScheduleNext(t *testing.T) {
	at := time.Date(2026, 12, 8, 1, 2, 30, 0, time.FixedZone("X", 3600))
	if got, want := ScheduleNext("*/5 * * * *", at), time.Date(2026, 12, 8, 0, 5, 0, 0, time.UTC); !got.Equal(want) || got.Location() != time.UTC {
		t.Fatalf("next %v, want %v", got, want)
	}
	if got := ScheduleNext("61 * * * *", at); !got.IsZero() {
		t.Fatalf("a bad spec's next %v", got)
	}
}

// TestRunFiredReads reads a fired of each cause and refuses one without a
// cause, with both, or with an at that is not a minute in UTC.
func TestRunFiredReads(t *testing.T) {
	const h = "0123456789abcdef0123456789abcdef01234567"
	fired := func(rest string) string {
		return "```json\n" + `{"ocx": 1, "kind": "fired", "node": "lab-1", "run": "` + h + `"` + rest + "}\n```\n"
	}
	m, err := ReadMessage([]byte(fired(`, "checkin": "` + h + `"`)))
	if err != nil || m.(*RunFired).Cause() != "checkin "+h {
		t.Fatalf("%v %v", m, err)
	}
	m, err = ReadMessage([]byte(fired(`, "at": "2026-12-08T00:05:00Z"`)))
	if err != nil || m.(*RunFired).Cause() != "at 2026-12-08T00:05:00Z" {
		t.Fatalf("%v %v", m, err)
	}
	for _, c := range []struct{ rest, field string }{
		{``, "checkin"},
		{`, "checkin": "` + h + `", "at": "2026-12-08T00:05:00Z"`, "checkin"},
		{`, "at": "2026-12-08T00:05:30Z"`, "at"},
		{`, "at": "2026-12-08T01:05:00+01:00"`, "at"},
		{`, "at": "tomorrow"`, "at"},
		{`, "checkin": "abc"`, "checkin"},
		{`, "why": "x"`, "why"},
	} {
		_, err := ReadMessage([]byte(fired(c.rest)))
		var fe *strictjson.FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want the field %s", c.rest, err, c.field)
		}
	}
}
