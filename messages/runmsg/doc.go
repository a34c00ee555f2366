// Package runmsg reads and writes the "ocx": 1 messages: seed 004's run,
// stop, started and ended, with a run's layers, values, patterns and the
// refusals of section 11, and protocol v1's record (TaskRecord), which
// shares their envelope.
package runmsg
