// Package hookshell is the shell of the daemon's hook watch (actors/hookwatch):
// the file events, the timer, the looks at each repository and the runs of
// its wake hook.
package hookshell
