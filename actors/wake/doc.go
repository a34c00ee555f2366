// Package wake is the hook's decisions as pure functions (D8, D27, D28):
// whom a post or a check-in wakes, why each other session is not woken,
// and how the posts nobody heard gather into notes.
package wake
