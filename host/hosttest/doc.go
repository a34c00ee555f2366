// Package hosttest fakes three of host's interfaces for tests: Clock, a
// manual clock that moves only when the test advances it; Spawner, which
// is also a Signaler, a Watcher and a RunStarter, whose processes end
// when the test says; and ProcTable, a process table the test sets. It
// has no contract tests against host/unixhost, and no fake of the lock,
// the pipes or the files.
package hosttest
