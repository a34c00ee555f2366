// Package answers is what the daemon answers on its socket (D66): the
// hook's work, done on the daemon's own config and open repositories.
package answers
