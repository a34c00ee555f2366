// Package turn is a session's pure core of one turn: which post it answers
// or obeys, how its answer, failure and job result are worded, and what a
// CI run's result and a review's verdict are; `workspace serve` applies it.
package turn
