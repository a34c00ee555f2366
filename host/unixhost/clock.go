package unixhost

import (
	"time"

	"github.com/ocx-go/ocx/host"
)

// Clock is the system clock.
type Clock struct{}

var _ host.Clock = Clock{}

// Now is time.Now.
func (Clock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (Clock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
