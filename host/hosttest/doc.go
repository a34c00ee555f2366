// Package hosttest fakes host's interfaces for the actors' tests: a manual
// clock, a spawner whose processes end when the test says, a settable
// process table, a lock, pipes and files in memory. Its contract tests run
// the same checks against a fake and against host/unixhost.
package hosttest
