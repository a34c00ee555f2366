package actors

import "time"

// Config holds the daemon's tunables. The zero value of a field means its default.
type Config struct {
	// Grace is how long a session the daemon started has between TERM and
	// KILL after a stop.
	Grace time.Duration
	// RetryAfter is how long a session waits before it tries again to watch a
	// process or to write an end note after a failure.
	RetryAfter time.Duration
	// EndAttempts is how many times a session tries to write its end note.
	EndAttempts int
	// RecentHashes is how many handled post hashes the node remembers, so that
	// a duplicate `post` line is handled once.
	RecentHashes int
	// RecentLaunches is how many handled launch notes each workspace remembers.
	RecentLaunches int
	// OrderWait bounds how long a run's started waits for the runs before
	// it (runSchedule): past it, the run is started out of the server's
	// order, and the log names the run it did not wait for any longer.
	OrderWait time.Duration
}

// The defaults of Config.
const (
	DefaultGrace          = 10 * time.Second
	DefaultRetryAfter     = 10 * time.Second
	defaultEndAttempts    = 5
	defaultRecentHashes   = 4096
	defaultRecentLaunches = 64
	defaultOrderWait      = 30 * time.Second
)

// withDefaults fills in every field left zero.
func (c Config) withDefaults() Config {
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.EndAttempts <= 0 {
		c.EndAttempts = defaultEndAttempts
	}
	if c.RecentHashes <= 0 {
		c.RecentHashes = defaultRecentHashes
	}
	if c.RecentLaunches <= 0 {
		c.RecentLaunches = defaultRecentLaunches
	}
	if c.OrderWait <= 0 {
		c.OrderWait = defaultOrderWait
	}
	return c
}
